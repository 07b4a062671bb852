rule report:
    input:
        mape=expand("results/tables/mape_{experiment}.csv", experiment=EXPERIMENTS),
        merge="results/measurements/summary.json",
        model_meta=expand("models/{experiment}/meta.json", experiment=EXPERIMENTS),
        feature_meta=expand("results/features/{experiment}.json", experiment=EXPERIMENTS),
        code=SYNPERF_CODE,
    params:
        experiments=config["experiments"],
    output:
        md="results/report.md",
        mape="results/tables/mape.csv",
        summary="results/tables/mape_summary.csv",
        counts="results/tables/row_counts.csv",
        dropped="results/tables/dropped_rows.csv",
        figure="results/figures/mape_by_gpu.png",
    script:
        "../scripts/report.py"
