# Features, split label and target of one experiment's rows, every feature set in one job (they share the
# decomposition and the scheduling of the rows).
rule features:
    input:
        measurements="results/measurements/all.parquet",
        registry=config["gpu_registry"],
        code=code_inputs("scripts/features.py"),
        hardware=MEASURED_FILES,
    output:
        tables=feature_outputs("parquet"),
        metas=feature_outputs("json"),
    log:
        "results/logs/features/{experiment}.log",
    benchmark:
        "results/benchmarks/features/{experiment}.tsv"
    priority: stage_priority("features")
    conda:
        "../environment.yml"
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        feature_sets=FEATURE_SETS_BUILT,
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/features.py"


# The split contract, checked before any model trains on a feature table: no unseen-GPU row in training or in
# the early-stopping validation rows, no held-out problem in training (synperf/evaluation/leak_check.py). Fails the job
# with a line naming experiment, check, GPU and count; the report shows each unseen GPU's twin share.
rule check_leaks:
    input:
        tables=feature_outputs("parquet"),
        registry=config["gpu_registry"],
        code=code_inputs("scripts/check_leaks.py"),
        hardware=MEASURED_FILES,
    output:
        reports=expand("results/leak_check/{fs}/{{experiment}}.json", fs=FEATURE_SETS_BUILT),
    log:
        "results/logs/check_leaks/{experiment}.log",
    benchmark:
        "results/benchmarks/check_leaks/{experiment}.tsv"
    priority: stage_priority("check_leaks")
    conda:
        "../environment.yml"
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=config["training"],
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/check_leaks.py"


# convenience target: only the feature tables `python -m synperf.lab` (the fast accuracy loop) reads, the top-level
# feature set of every protocol family
rule lab_features:
    input:
        [
            f"results/features/{FEATURE_SET}/{e}.{ext}"
            for e in PROTOCOLS.get("experiments", EXPERIMENTS)
            for ext in ("parquet", "json")
        ],
