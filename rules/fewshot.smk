# Few-shot calibration (synperf/evaluation/fewshot.py): per experiment with unseen GPUs, the chosen path's predictions
# of its unseen rows and its leave-one-seen-GPU-out predictions of the seen GPUs (rule fewshot_rows); then the
# calibration per k chosen on the seen GPUs alone and scored on the unseen GPUs with k rows of a short sweep (rule
# fewshot). Rule predict_throughput times batch predict on one CPU core for the report's goals table.


rule fewshot_rows:
    input:
        **RECIPE_INPUT,
        features=f"results/features/{FEATURE_SET}/{{experiment}}.parquet",
        meta=f"results/features/{FEATURE_SET}/{{experiment}}.json",
        path_choice="models/{experiment}/path.json",
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
        code=code_inputs("scripts/fewshot_rows.py"),
    output:
        "results/fewshot/{experiment}.parquet",
    log:
        "results/logs/fewshot_rows/{experiment}.log",
    benchmark:
        "results/benchmarks/fewshot_rows/{experiment}.tsv"
    threads: 1
    params:
        training={**config["training"], **SELECTION.get("training", {})},
        seed=config["seed"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/fewshot_rows.py"


rule fewshot:
    input:
        rows=expand("results/fewshot/{experiment}.parquet", experiment=FEWSHOT_EXPERIMENTS),
        code=code_inputs("scripts/fewshot.py"),
    output:
        table=report("results/tables/fewshot.csv", caption="../workflow/report/fewshot.rst", category="2. MAPE tables"),
        choice="results/tables/fewshot_choice.csv",
        figure=report("results/figures/fewshot.png", caption="../workflow/report/fig_fewshot.rst", category="1. Report"),
    log:
        "results/logs/fewshot.log",
    benchmark:
        "results/benchmarks/fewshot.tsv"
    params:
        figure_experiments=CORE_EXPERIMENTS,
    script:
        "../scripts/fewshot.py"


rule predict_throughput:
    input:
        features=[f"results/features/{FEATURE_SET}/{e}.parquet" for e in CORE_EXPERIMENTS],
        path_choices=[f"models/{e}/path.json" for e in CORE_EXPERIMENTS],
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
        code=code_inputs("scripts/predict_throughput.py"),
    output:
        "results/benchmarks/predict_throughput.json",
    log:
        "results/logs/predict_throughput.log",
    benchmark:
        "results/benchmarks/predict_throughput.tsv"
    threads: 1
    params:
        experiments={e: config["experiments"][e] for e in CORE_EXPERIMENTS},
        n_launches=20000,
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/predict_throughput.py"
