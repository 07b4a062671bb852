from synperf.data.hardware import measured_files

# the measured hardware files merged over the registry (none when characterize.use_measured is false)
MEASURED_FILES = [str(p) for p in measured_files(MEASURED_DIR)]


rule features:
    input:
        measurements="results/measurements/all.parquet",
        registry=config["gpu_registry"],
        code=code_inputs("scripts/features.py"),
        hardware=MEASURED_FILES,
    output:
        table="results/features/{feature_set}/{experiment}.parquet",
        meta="results/features/{feature_set}/{experiment}.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/features.py"


# The split contract, checked before any model trains on a feature table: no unseen-GPU row in training or in
# the early-stopping validation rows, no held-out problem in training (synperf/evaluation/leak_check.py). Fails the job
# with a line naming experiment, check, GPU and count; the report shows each unseen GPU's twin share.
rule check_leaks:
    input:
        table="results/features/{feature_set}/{experiment}.parquet",
        registry=config["gpu_registry"],
        code=code_inputs("scripts/check_leaks.py"),
        hardware=MEASURED_FILES,
    output:
        report="results/leak_check/{feature_set}/{experiment}.json",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=config["training"],
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    log:
        "results/logs/check_leaks/{feature_set}/{experiment}.log",
    script:
        "../scripts/check_leaks.py"
