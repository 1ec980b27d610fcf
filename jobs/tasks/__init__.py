"""The tasks a job may ask for, each with its output format: the registry, declared once."""
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.tasks.classify_task import ClassifyTask
from poolq.jobs.tasks.embed_task import EmbedTask
from poolq.jobs.tasks.job_task import JobTask, OptionRejected
from poolq.jobs.tasks.multi_task import MultiTask
from poolq.jobs.tasks.score_task import ScoreTask
from poolq.jobs.tasks.sparse_task import SparseTask
from poolq.jobs.tasks.token_classify_task import TokenClassifyTask
from poolq.jobs.tasks.token_embed_task import TokenEmbedTask

_TASKS: tuple[type[JobTask], ...] = (EmbedTask, SparseTask, ClassifyTask, ScoreTask, TokenEmbedTask, TokenClassifyTask)
JOB_TASKS: dict[str, type[JobTask]] = {task.name: task for task in _TASKS}


def job_task(spec: JobSpec) -> JobTask:
    """The task ``spec`` asks for (or its tasks, from one forward pass), bound to it."""
    if isinstance(spec.task, list):
        return MultiTask(spec, [JOB_TASKS[name](spec) for name in spec.task])
    return JOB_TASKS[spec.task](spec)


__all__ = ["JOB_TASKS", "ClassifyTask", "EmbedTask", "JobTask", "MultiTask", "OptionRejected", "ScoreTask", "SparseTask",
           "TokenClassifyTask", "TokenEmbedTask", "job_task"]
