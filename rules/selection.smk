# Model selection without the test GPUs (synperf/evaluation/selection.py): each candidate feature set is scored by leave one
# seen GPU out inside every experiment's configured training rows; `choose_feature_set` writes the selection table
# and whether the configured primary `feature_set` is the winner (the report shows both).
SELECTION = config.get("selection") or {"candidates": [FEATURE_SET]}
SELECTION_EXPERIMENTS = list(SELECTION.get("experiments") or EXPERIMENTS)


rule score_selection:
    input:
        table="results/features/{feature_set}/{experiment}.parquet",
        meta="results/features/{feature_set}/{experiment}.json",
        leak_check="results/leak_check/{feature_set}/{experiment}.json",
        registry=config["gpu_registry"],
        code=code_inputs("scripts/score_selection.py"),
        hardware=MEASURED_FILES,
    output:
        table="results/selection/{experiment}/{feature_set}.csv",
    params:
        training={**config["training"], **SELECTION.get("training", {})},
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    threads: 1
    log:
        "results/logs/selection/{experiment}_{feature_set}.log",
    script:
        "../scripts/score_selection.py"


rule choose_feature_set:
    input:
        scores=expand("results/selection/{experiment}/{feature_set}.csv", experiment=SELECTION_EXPERIMENTS,
                      feature_set=SELECTION["candidates"]),
        code=code_inputs("scripts/choose_feature_set.py"),
    output:
        table="results/tables/selection.csv",
        choice="results/selection/choice.json",
    params:
        configured=FEATURE_SET,
        training={**config["training"], **SELECTION.get("training", {})},
    log:
        "results/logs/selection/choose.log",
    script:
        "../scripts/choose_feature_set.py"
