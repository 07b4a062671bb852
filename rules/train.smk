rule train:
    input:
        table="results/features/{experiment}.parquet",
        meta="results/features/{experiment}.json",
        code=SYNPERF_CODE,
    output:
        model="models/{experiment}/model.pt",
        meta="models/{experiment}/meta.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=config["training"],
        seed=config["seed"],
    threads: 2
    log:
        "results/logs/train_{experiment}.log",
    script:
        "../scripts/train.py"
