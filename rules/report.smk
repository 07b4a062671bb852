def _tables(experiments, feature_set, group):
    return [f"results/tables/mape/{e}/{feature_set}-{group}.csv" for e in experiments]


rule report:
    input:
        mape=_tables(EXPERIMENTS, FEATURE_SET, "all"),
        compare=[t for fs in COMPARE_SETS for t in _tables(EXPERIMENTS, fs, "all")],
        ablation=[t for g in ABLATION.get("groups", []) for t in _tables(ABLATION.get("experiments", []), FEATURE_SET, g)],
        merge="results/measurements/summary.json",
        model_meta=[f"models/{e}/{FEATURE_SET}-all/meta.json" for e in EXPERIMENTS],
        feature_meta=[f"results/features/{FEATURE_SET}/{e}.json" for e in EXPERIMENTS],
        code=SYNPERF_CODE,
    params:
        experiments=config["experiments"],
    output:
        md="results/report.md",
        mape="results/tables/mape.csv",
        summary="results/tables/mape_summary.csv",
        compare="results/tables/feature_set_comparison.csv",
        ablation="results/tables/ablation.csv",
        counts="results/tables/row_counts.csv",
        dropped="results/tables/dropped_rows.csv",
        figure="results/figures/mape_by_gpu.png",
    script:
        "../scripts/report.py"
