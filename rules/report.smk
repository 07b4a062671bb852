# The Markdown report, its tables and figures. Outputs wrapped in report() are registered with Snakemake's report
# mechanism: after a run, `snakemake --report results/report.zip` builds a browsable HTML report of them
# (captions in workflow/report/).
rule report:
    input:
        mape=[primary_file("results/tables/mape/{experiment}/{fs}-all.csv", e) for e in EXPERIMENTS],
        compare=[
            t for fs, _ in TRAINED for e in EXPERIMENTS if fs != primary_fs(e) for t in mape_tables([e], fs, "all")
        ],
        ablation=[
            t for g in ABLATION.get("groups", []) for t in mape_tables(ABLATION.get("experiments", []), FEATURE_SET, g)
        ],
        merge="results/measurements/summary.json",
        model_meta=[primary_file("models/{experiment}/{fs}-all/meta.json", e) for e in EXPERIMENTS],
        feature_meta=[primary_file("results/features/{fs}/{experiment}.json", e) for e in EXPERIMENTS],
        predictions=[primary_file("results/predictions/{experiment}/{fs}-all.parquet", e) for e in EXPERIMENTS],
        protocol_tables=expand("results/protocols/{experiment}.csv", experiment=PROTOCOL_EXPERIMENTS),
        protocol_cdfs=expand("results/protocols/{experiment}_cdf.csv", experiment=PROTOCOL_EXPERIMENTS),
        leak_checks=[primary_file("results/leak_check/{fs}/{experiment}.json", e) for e in EXPERIMENTS],
        selection_table="results/tables/selection.csv",
        selection_choice="results/selection/choice.json",
        recipe_choices=[RECIPE_CHOICE.format(experiment=e) for e in SELECTION_EXPERIMENTS] if RECIPES else [],
        e2e_summary="results/e2e/e2e_summary.csv",
        e2e_configs="results/e2e/e2e_configs.csv",
        e2e_breakdown="results/e2e/e2e_breakdown.csv",
        e2e_overhead="results/e2e/overhead.json",
        e2e_figure="results/e2e/e2e_breakdown.png",
        e2e_models="results/e2e/e2e_models.csv",
        serving_mape="results/serving/serving_mape.csv",
        serving_logo_mape="results/serving/serving_logo_mape.csv",
        benchmarks=benchmark_files(),
        ceiling_summary="results/ceiling/summary.json",
        ceiling_figure="results/ceiling/gap_cdf.png",
        fewshot_table="results/tables/fewshot.csv",
        fewshot_choice="results/tables/fewshot_choice.csv",
        fewshot_figure="results/figures/fewshot.png",
        predict_throughput="results/benchmarks/predict_throughput.json",
        code=code_inputs("scripts/report.py"),
        registry=config["gpu_registry"],
        hardware=MEASURED_FILES,
    output:
        md=report("results/report.md", caption="../workflow/report/report_md.rst", category="1. Report"),
        mape=report("results/tables/mape.csv", caption="../workflow/report/mape.rst", category="2. MAPE tables"),
        summary=report(
            "results/tables/mape_summary.csv", caption="../workflow/report/mape_summary.rst", category="2. MAPE tables"
        ),
        compare=report(
            "results/tables/feature_set_comparison.csv",
            caption="../workflow/report/compare.rst",
            category="2. MAPE tables",
        ),
        ablation=report(
            "results/tables/ablation.csv", caption="../workflow/report/ablation.rst", category="2. MAPE tables"
        ),
        counts=report("results/tables/row_counts.csv", caption="../workflow/report/counts.rst", category="4. Data"),
        stage_times=report(
            "results/tables/stage_times.csv", caption="../workflow/report/stage_times.rst", category="4. Data"
        ),
        dropped=report("results/tables/dropped_rows.csv", caption="../workflow/report/dropped.rst", category="4. Data"),
        figure=report(
            "results/figures/mape_by_gpu.png", caption="../workflow/report/fig_mape.rst", category="1. Report"
        ),
        protocol_summary=report(
            "results/tables/protocols_summary.csv",
            caption="../workflow/report/protocols_summary.rst",
            category="3. Methods compared",
        ),
        protocol_per_gpu=report(
            "results/tables/protocols_per_gpu.csv",
            caption="../workflow/report/protocols_per_gpu.rst",
            category="3. Methods compared",
        ),
        methods_fig=report(
            "results/figures/methods_by_protocol.png",
            caption="../workflow/report/fig_methods.rst",
            category="3. Methods compared",
        ),
        cdf_fig=report(
            "results/figures/error_cdf.png", caption="../workflow/report/fig_cdf.rst", category="3. Methods compared"
        ),
        scatter_fig=report(
            "results/figures/predicted_vs_measured.png",
            caption="../workflow/report/fig_scatter.rst",
            category="1. Report",
        ),
        goals=report("results/tables/goals.csv", caption="../workflow/report/goals.rst", category="1. Report"),
    log:
        "results/logs/report.log",
    conda:
        "../environment.yml"
    params:
        experiments=config["experiments"],
        protocol_experiments=[e for e in PROTOCOLS.get("experiments", EXPERIMENTS)],
        measured_dir=MEASURED_DIR,
        core_experiments=CORE_EXPERIMENTS,
    script:
        "../scripts/report.py"
