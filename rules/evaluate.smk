rule evaluate:
    input:
        table="results/features/{experiment}.parquet",
        meta="results/features/{experiment}.json",
        model="models/{experiment}/model.pt",
        model_meta="models/{experiment}/meta.json",
        code=SYNPERF_CODE,
    output:
        predictions="results/predictions/{experiment}.parquet",
        mape="results/tables/mape_{experiment}.csv",
    script:
        "../scripts/evaluate.py"
