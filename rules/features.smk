rule features:
    input:
        measurements="results/measurements/all.parquet",
        registry=config["gpu_registry"],
        code=SYNPERF_CODE,
    output:
        table="results/features/{experiment}.parquet",
        meta="results/features/{experiment}.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        feature_set=config["feature_set"],
        seed=config["seed"],
    script:
        "../scripts/features.py"
