# End-to-end inference latency (synperf/e2e/): every serving configuration with a real run in the public data
# (pipeweave e2e/real) is generated from its model config and trace, composed from each kernel family's bulk
# `synperf.api.predict` of the evaluation models (the fingerprint predictors), NCCL collectives and a
# per-iteration overhead fitted leave-one-configuration-out, and scored; its tables and figure are in the HTML report
# (`snakemake --report`, category "5. End-to-end").
E2E_FAMILIES = ["gemm", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul", "fused_moe"]


rule e2e:
    input:
        models=fingerprint_files([e for e in E2E_FAMILIES if e in EXPERIMENTS]),
        registry=config["gpu_registry"],
        code=code_inputs("scripts/e2e.py"),
        hardware=MEASURED_FILES,
        data=e2e_files(),
    output:
        configs=report(
            "results/e2e/e2e_configs.csv", caption="../workflow/report/e2e_configs.rst", category="5. End-to-end"
        ),
        summary=report(
            "results/e2e/e2e_summary.csv", caption="../workflow/report/e2e_summary.rst", category="5. End-to-end"
        ),
        breakdown=report(
            "results/e2e/e2e_breakdown.csv", caption="../workflow/report/e2e_breakdown.rst", category="5. End-to-end"
        ),
        models="results/e2e/e2e_models.csv",
        overhead="results/e2e/overhead.json",
        figure=report(
            "results/e2e/e2e_breakdown.png", caption="../workflow/report/fig_e2e.rst", category="5. End-to-end"
        ),
    log:
        "results/logs/e2e.log",
    benchmark:
        "results/benchmarks/e2e.tsv"
    priority: stage_priority("e2e")
    conda:
        "../environment.yml"
    params:
        data_dir=lambda wc: config["public_data_dir"],
        measured_dir=MEASURED_DIR,
        e2e=config.get("e2e", {}),
    script:
        "../scripts/e2e.py"
