"""Rule script: the Markdown report, its tables and figures."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821  (this checkout's synperf first)

from synperf.pipeline.rule import run
from synperf.reporting.report import build_report

sm = snakemake  # noqa: F821


def main():
    build_report(list(sm.input.mape), sm.input.merge, list(sm.input.model_meta), list(sm.input.feature_meta),
                 sm.output.md, sm.output.mape, sm.output.summary, sm.output.counts, sm.output.dropped,
                 sm.output.figure, experiments=dict(sm.params.experiments),
                 compare_tables=list(sm.input.compare), ablation_tables=list(sm.input.ablation),
                 out_compare=sm.output.compare, out_ablation=sm.output.ablation,
                 protocols={"tables": list(sm.input.protocol_tables), "cdfs": list(sm.input.protocol_cdfs),
                            "predictions": list(sm.input.predictions),
                            "experiments": list(sm.params.protocol_experiments),
                            "out_summary": sm.output.protocol_summary, "out_per_gpu": sm.output.protocol_per_gpu,
                            "out_methods_fig": sm.output.methods_fig, "out_cdf_fig": sm.output.cdf_fig,
                            "out_scatter_fig": sm.output.scatter_fig},
                 evaluation={"leak_checks": list(sm.input.leak_checks), "selection_table": sm.input.selection_table,
                             "selection_choice": sm.input.selection_choice,
                         "recipe_choices": list(sm.input.recipe_choices)},
                 registry_path=sm.input.registry, measured_dir=sm.params.measured_dir,
                 e2e={"summary": sm.input.e2e_summary, "configs": sm.input.e2e_configs,
                      "breakdown": sm.input.e2e_breakdown, "overhead": sm.input.e2e_overhead,
                      "figure": sm.input.e2e_figure, "models": sm.input.e2e_models},
                 benchmarks=list(sm.input.benchmarks), out_stage_times=sm.output.stage_times,
                 ceiling={"dir": str(Path(sm.input.ceiling_summary).parent), "figure": sm.input.ceiling_figure},
                 fewshot={"table": sm.input.fewshot_table, "choice": sm.input.fewshot_choice,
                          "figure": sm.input.fewshot_figure},
                 goals={"out": sm.output.goals, "throughput": sm.input.predict_throughput,
                        "families": list(sm.params.core_experiments), "serving": sm.input.serving_mape,
                        "serving_logo": sm.input.serving_logo_mape})


run(sm, main)
