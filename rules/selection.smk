# Model selection without the test GPUs (synperf/evaluation/selection.py): each candidate feature set is scored by leave one
# seen GPU out inside every experiment's configured training rows; `choose_feature_set` writes the selection table
# and whether the configured `feature_set` is the winner, and per experiment whether its primary set is the rule's
# choice over only the experiments that may inform it (synperf/evaluation/evidence.py; the report shows all three).


rule score_selection:
    input:
        tables=expand("results/features/{fs}/{{experiment}}.parquet", fs=SELECTION["candidates"]),
        metas=expand("results/features/{fs}/{{experiment}}.json", fs=SELECTION["candidates"]),
        leak_checks=expand("results/leak_check/{fs}/{{experiment}}.json", fs=SELECTION["candidates"]),
        registry=config["gpu_registry"],
        code=code_inputs("scripts/score_selection.py"),
        hardware=MEASURED_FILES,
        primary_table=primary_input("results/features/{fs}/{experiment}.parquet"),
        primary_meta=primary_input("results/features/{fs}/{experiment}.json"),
    output:
        **RECIPE_OUTPUTS,
        tables=expand("results/selection/{{experiment}}/{fs}.csv", fs=SELECTION["candidates"]),
    log:
        "results/logs/selection/{experiment}.log",
    benchmark:
        "results/benchmarks/score_selection/{experiment}.tsv"
    priority: stage_priority("score_selection")
    conda:
        "../environment.yml"
    threads: 1
    params:
        training={**config["training"], **SELECTION.get("training", {})},
        recipes=RECIPES,
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/score_selection.py"


rule choose_feature_set:
    input:
        scores=expand(
            "results/selection/{experiment}/{feature_set}.csv",
            experiment=SELECTION_EXPERIMENTS,
            feature_set=SELECTION["candidates"],
        ),
        code=code_inputs("scripts/choose_feature_set.py"),
    output:
        table="results/tables/selection.csv",
        choice="results/selection/choice.json",
    log:
        "results/logs/selection/choose.log",
    benchmark:
        "results/benchmarks/choose_feature_set.tsv"
    conda:
        "../environment.yml"
    params:
        configured=FEATURE_SET,
        training={**config["training"], **SELECTION.get("training", {})},
        experiments={e: config["experiments"][e] for e in SELECTION_EXPERIMENTS},
    script:
        "../scripts/choose_feature_set.py"
