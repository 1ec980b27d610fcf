"""The Celery app: one configuration for API, workers (and, later, beat)."""
from __future__ import annotations

from celery import Celery

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, RECONCILE_TASK, WEBHOOK_QUEUE
from poolq.jobs.settings import Role, Settings


def create_celery_app(settings: Settings, role: Role = "worker") -> Celery:
    """A Celery app for ``settings``; producers and workers must build it from the same values
    (``role`` sets only the deadlines of its broker connections: the API's are short)."""
    app = Celery("poolq", broker=settings.broker.redis_url, backend=None)
    transport = {"visibility_timeout": settings.tasks.visibility_timeout_s, **_broker_deadlines(settings, role)}
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.tasks.task_soft_time_limit_s,
        task_time_limit=settings.tasks.task_time_limit_s,
        broker_transport_options=transport,
        # kombu's Redis transport, surviving a restore that fails while the broker is down
        # (worker/broker_transport.py).
        broker_transport="poolq.worker.broker_transport:Transport",
        visibility_timeout=settings.tasks.visibility_timeout_s,
        broker_connection_retry_on_startup=True,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        task_default_queue=CONTROL_QUEUE,
        task_create_missing_queues=True,
        worker_hijack_root_logger=False,
        # Task events (received/started/succeeded/failed, and sent by producers) for Flower.
        worker_send_task_events=True,
        task_send_sent_event=True,
        # Beat: RedBeat keeps schedule state in Redis and holds a lock, so one beat runs at a time;
        # PoolqBeatScheduler rides out Redis restarts and wipes instead of exiting.
        beat_scheduler="poolq.worker.beat.beat_scheduler.PoolqBeatScheduler",
        redbeat_redis_url=settings.broker.redis_url,
        redbeat_key_prefix="poolq:redbeat:",
        redbeat_redis_options={"health_check_interval": 30, "socket_timeout": settings.broker.redis_worker_timeout_s,
                               "socket_connect_timeout": settings.broker.redis_connect_timeout_s},
        redbeat_lock_timeout=max(30, int(settings.reliability.reconcile_interval_s * 5)),
        beat_max_loop_interval=min(5.0, settings.reliability.reconcile_interval_s),
        beat_schedule={
            "poolq-reconcile": {
                "task": RECONCILE_TASK,
                "schedule": settings.reliability.reconcile_interval_s,
                "options": {"queue": CONTROL_QUEUE, "expires": settings.reliability.reconcile_interval_s * 2},
            }
        },
    )
    if role == "api":  # a send that fails is retried this often, not Celery's default 3 times, within the request
        app.conf.task_publish_retry_policy = {"max_retries": settings.broker.redis_retries, "interval_start": 0,
                                              "interval_step": 0.2, "interval_max": 0.5}
    app.conf.poolq_queues = (CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE)
    return app


def _broker_deadlines(settings: Settings, role: Role) -> dict:
    """kombu's Redis transport options: without them its connections wait for ever on a stalled broker."""
    return {
        "socket_connect_timeout": settings.broker.redis_connect_timeout_s,
        "socket_timeout": settings.broker.redis_timeout_s(role),
        "health_check_interval": settings.broker.redis_health_check_interval(role),
    }
