from synperf.data.hardware import measured_files


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


# The split contract, checked before any model trains on a feature table: no unseen-GPU row in training or in
# the early-stopping validation rows, no held-out problem in training (synperf/evaluation/leak_check.py). Fails the job
# with a line naming experiment, check, GPU and count; the report shows each unseen GPU's twin share.
rule check_leaks:
    input:
        table="results/features/{feature_set}/{experiment}.parquet",
        registry=config["gpu_registry"],
        code=SYNPERF_CODE,
    output:
        report="results/leak_check/{feature_set}/{experiment}.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=config["training"],
        seed=config["seed"],
    log:
        "results/logs/check_leaks/{feature_set}/{experiment}.log",
    script:
        "../scripts/check_leaks.py"
