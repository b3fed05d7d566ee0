"""Pass infrastructure: pass base, options, registry, pipeline parser."""

from .base import ModulePass, NamedPipeline, PassError
from .options import option
from .pipeline import Pipeline, PipelineFailure, PipelineSyntaxError, run_pipeline

__all__ = ["ModulePass", "NamedPipeline", "PassError", "option", "Pipeline", "PipelineFailure",
           "PipelineSyntaxError", "run_pipeline"]
