rule evaluate:
    input:
        table="results/features/{feature_set}/{experiment}.parquet",
        meta="results/features/{feature_set}/{experiment}.json",
        model="models/{experiment}/{feature_set}-{group}/model.pt",
        model_meta="models/{experiment}/{feature_set}-{group}/meta.json",
        code=code_inputs("scripts/evaluate.py"),
    output:
        predictions="results/predictions/{experiment}/{feature_set}-{group}.parquet",
        mape="results/tables/mape/{experiment}/{feature_set}-{group}.csv",
    script:
        "../scripts/evaluate.py"
