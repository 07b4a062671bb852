# One job per public source: its files -> canonical measurement table; then one merge with our own
# profiled measurements (data/measurements/<gpu>/<kernel>.parquet).


rule ingest_source:
    input:
        files=source_files,
        registry=config["gpu_registry"],
        code=code_inputs("scripts/ingest.py"),
    output:
        table="results/measurements/sources/{source}.parquet",
        summary="results/measurements/sources/{source}.json",
    log:
        "results/logs/ingest/{source}.log",
    benchmark:
        "results/benchmarks/ingest_source/{source}.tsv"
    conda:
        "../environment.yml"
    params:
        data_dir=config["public_data_dir"],
        cfg=lambda wc: config["ingest"].get(wc.source, {}),
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/ingest.py"


rule merge_measurements:
    input:
        tables=expand("results/measurements/sources/{source}.parquet", source=config["ingest"]["sources"]),
        summaries=expand("results/measurements/sources/{source}.json", source=config["ingest"]["sources"]),
        own=OWN_MEASUREMENTS,
        code=code_inputs("scripts/merge_measurements.py"),
        registry=config["gpu_registry"],
    output:
        table="results/measurements/all.parquet",
        summary="results/measurements/summary.json",
    log:
        "results/logs/ingest/merge.log",
    benchmark:
        "results/benchmarks/merge_measurements.tsv"
    conda:
        "../environment.yml"
    params:
        measured_dir=MEASURED_DIR,
        quality=config["ingest"].get("quality", {}),
    script:
        "../scripts/merge_measurements.py"
