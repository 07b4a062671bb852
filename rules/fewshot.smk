# Few-shot on unseen GPUs (synperf/pipeline/fewshot.py): per experiment with unseen GPUs, its fingerprint predictor
# (trained on the seen GPUs) refits each unseen GPU's constants on k rows of a short sweep, then applies the
# correction it chose per k on its training GPUs alone; scored on the other rows (rule fewshot). Rule
# predict_throughput times batch predict on one CPU core for the report's goals table.


rule fewshot:
    input:
        models=expand("models/{experiment}/fingerprint.joblib", experiment=FEWSHOT_EXPERIMENTS),
        tables=[f"results/features/{FEATURE_SET}/{e}.parquet" for e in FEWSHOT_EXPERIMENTS],
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
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
        kernels={e: config["experiments"][e]["kernel"] for e in FEWSHOT_EXPERIMENTS},
        figure_experiments=CORE_EXPERIMENTS,
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/fewshot.py"


rule predict_throughput:
    input:
        features=[primary_file("results/features/{fs}/{experiment}.parquet", e) for e in CORE_EXPERIMENTS],
        models=fingerprint_files(CORE_EXPERIMENTS),
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
