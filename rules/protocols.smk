# Paper-style evaluation: our MLP and the baselines (synperf/baselines.py) under the configured split,
# leave-one-GPU-out and leave-one-architecture-out (synperf/protocols.py). Not part of `rule all` (it trains
# one model per fold and method); run `snakemake --cores all protocols`.
PROTOCOLS = config.get("protocols", {})


rule evaluate_protocols:
    input:
        measurements="results/measurements/all.parquet",
        registry=config["gpu_registry"],
        code=SYNPERF_CODE,
    output:
        table="results/protocols/{experiment}.csv",
    params:
        exp=lambda wc: config["experiments"][wc.experiment],
        training=lambda wc: {**config["training"], **PROTOCOLS.get("training", {})},
        names=PROTOCOLS.get("names", ["configured", "logo", "loao"]),
        methods=PROTOCOLS.get("methods"),
        feature_set=FEATURE_SET,
        seed=config["seed"],
    threads: 2
    script:
        "../scripts/evaluate_protocols.py"


rule protocols:
    input:
        tables=expand("results/protocols/{experiment}.csv", experiment=PROTOCOLS.get("experiments", EXPERIMENTS)),
    output:
        md="results/protocols.md",
        summary="results/tables/protocols_summary.csv",
    script:
        "../scripts/protocols_report.py"
