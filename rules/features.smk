from synperf.hardware import measured_files


rule features:
    input:
        measurements="results/measurements/all.parquet",
        registry=config["gpu_registry"],
        code=SYNPERF_CODE,
        hardware=lambda wc: [str(p) for p in measured_files(config.get("hardware_measurements_dir", "data/hardware"))],
    output:
        table="results/features/{feature_set}/{experiment}.parquet",
        meta="results/features/{feature_set}/{experiment}.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        seed=config["seed"],
    script:
        "../scripts/features.py"
