# Performance ceiling (synperf/evaluation/ceiling.py): a P80 (pinball) efficiency model per experiment with the
# primary recipe and the `ceiling.training` budget, its calibration, the gap of every measured launch to it, the
# fused-MoE default configs of the pipeweave sweeps against it, and leave-one-GPU-out config suggestions beside
# the authors' comparison files (pipeweave moe_dse/improve, demo/topk_underperforming_*; in the data manifest).


rule ceiling:
    input:
        tables=[f"results/features/{FEATURE_SET}/{e}.parquet" for e in EXPERIMENTS],
        metas=[f"results/features/{FEATURE_SET}/{e}.json" for e in EXPERIMENTS],
        leak_checks=[f"results/leak_check/{FEATURE_SET}/{e}.json" for e in EXPERIMENTS],
        comparison=CEILING_COMPARISON_FILES,
        registry=config["gpu_registry"],
        code=code_inputs("scripts/ceiling.py"),
        hardware=MEASURED_FILES,
    output:
        tables=[f"results/ceiling/{t}.csv" for t in CEILING_TABLES],
        figure="results/ceiling/gap_cdf.png",
        summary="results/ceiling/summary.json",
        models=directory("models/ceiling"),
    log:
        "results/logs/ceiling.log",
    benchmark:
        "results/benchmarks/ceiling.tsv"
    priority: stage_priority("ceiling")
    conda:
        "../environment.yml"
    threads: 1
    params:
        experiments=config["experiments"],
        training=config["training"],
        ceiling=CEILING,
        seed=config["seed"],
        feature_set=FEATURE_SET,
        # the public-data folder the MoE part reads from (beyond the comparison files above)
        data_dir=lambda wc: config["public_data_dir"],
        gpu_map=config["ingest"]["pipeweave"]["moe_gpu_map"],
        measured_dir=MEASURED_DIR,
    script:
        "../scripts/ceiling.py"
