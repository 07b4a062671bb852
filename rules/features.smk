rule features:
    input:
        measurements="results/measurements/all.parquet",
        registry=config["gpu_registry"],
        code=SYNPERF_CODE,
    output:
        table="results/features/{feature_set}/{experiment}.parquet",
        meta="results/features/{feature_set}/{experiment}.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        seed=config["seed"],
    script:
        "../scripts/features.py"
