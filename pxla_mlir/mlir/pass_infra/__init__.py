"""Pass infrastructure: pass base, options, registry, pipeline parser."""

from pxla_mlir.mlir.pass_infra.base import ModulePass, NamedPipeline, PassError
from pxla_mlir.mlir.pass_infra.options import option
from pxla_mlir.mlir.pass_infra.pipeline import Pipeline, PipelineFailure, PipelineSyntaxError, run_pipeline
from pxla_mlir.mlir.pass_infra.plugins import PluginError, register_pass

__all__ = ["ModulePass", "NamedPipeline", "PassError", "option", "Pipeline", "PipelineFailure",
           "PipelineSyntaxError", "PluginError", "register_pass", "run_pipeline"]
