# Few-shot calibration (synperf/evaluation/fewshot.py): per experiment with unseen GPUs, the chosen path's
# leave-one-seen-GPU-out predictions of the seen GPUs (from the selection stage) and its predictions of the unseen
# rows (from the protocol stage); the calibration per k is chosen, per experiment, on the seen GPUs of the experiments
# not trained on its unseen GPUs, and scored on the unseen GPUs with k rows of a short sweep (rule fewshot). Rule
# predict_throughput times batch predict on one CPU core for the report's goals table.


rule fewshot:
    input:
        path_rows=expand(PATH_ROWS, experiment=FEWSHOT_EXPERIMENTS),
        protocol_rows=expand("results/protocols/{experiment}_rows.parquet", experiment=FEWSHOT_EXPERIMENTS),
        path_choices=expand("models/{experiment}/path.json", experiment=FEWSHOT_EXPERIMENTS),
        code=code_inputs("scripts/fewshot.py"),
    output:
        table=report("results/tables/fewshot.csv", caption="../workflow/report/fewshot.rst", category="2. MAPE tables"),
        choice="results/tables/fewshot_choice.csv",
        figure=report("results/figures/fewshot.png", caption="../workflow/report/fig_fewshot.rst", category="1. Report"),
    log:
        "results/logs/fewshot.log",
    benchmark:
        "results/benchmarks/fewshot.tsv"
    priority: stage_priority("fewshot")
    conda:
        "../environment.yml"
    params:
        experiments=FEWSHOT_EXPERIMENTS,
        configs={e: config["experiments"][e] for e in FEWSHOT_EXPERIMENTS},
        figure_experiments=CORE_EXPERIMENTS,
    script:
        "../scripts/fewshot.py"


rule predict_throughput:
    input:
        features=[primary_file("results/features/{fs}/{experiment}.parquet", e) for e in CORE_EXPERIMENTS],
        path_choices=[f"models/{e}/path.json" for e in CORE_EXPERIMENTS],
        path_models=path_model_files(CORE_EXPERIMENTS),
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
        code=code_inputs("scripts/predict_throughput.py"),
    output:
        "results/benchmarks/predict_throughput.json",
    log:
        "results/logs/predict_throughput.log",
    benchmark:
        "results/benchmarks/predict_throughput.tsv"
    conda:
        "../environment.yml"
    threads: 1
    params:
        experiments={e: config["experiments"][e] for e in CORE_EXPERIMENTS},
        n_launches=20000,
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/predict_throughput.py"
