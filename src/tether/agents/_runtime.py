"""The running agent: one event loop that serves a behavior's mailbox.

The loop receives messages, answers pings and describe requests at once, runs ``async``
actions as tasks and synchronous ones in a thread pool (a synchronous action sends its
response from its own thread), never more than the behavior's ``max_concurrency`` at a
time, and runs the control loops (threads for synchronous loops, tasks for ``async``
ones). Messages the exchange refused are answered with the reason when their sender can
be read, and the agent keeps serving.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tether.agents._context import (
    ActionContext,
    AgentContext,
    AgentSpec,
    LoopError,
    _current,
    current_action,
    set_child_manager_factory,
)
from tether.agents._journal import Journal, answer_lost
from tether.agents._loops import ControlLoops
from tether.agents._metrics import open_for_agent
from tether.agents._pool import Workers
from tether.agents.behavior import actions_of, describe_actions
from tether.agents.exceptions import UnknownActionError
from tether.agents.handle import exchange_context
from tether.agents.message import (
    CANCEL,
    DESCRIBE,
    PING,
    RESPONSE,
    SHUTDOWN,
    STATS,
    STOP,
    Message,
    Rejected,
    Request,
    Response,
    error_info,
)
from tether.exceptions import AgentError, AgentLaunchError, TetherError

__all__ = [
    'ActionContext',
    'AgentContext',
    'AgentRuntime',
    'AgentSpec',
    'LoopError',
    'current_action',
    'set_child_manager_factory',
]

logger = logging.getLogger(__name__)

_RECENT = 4096


class AgentRuntime:
    """Runs one behavior as an agent until it is shut down.

    Args:
        spec: The agent to run.
    """

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.behavior = spec.behavior
        self.agent_id = spec.agent_id
        self.exchange = spec.exchange
        self.state_dir = spec.state_dir
        cap = spec.max_concurrency
        if cap is None:
            cap = getattr(self.behavior, 'max_concurrency', None)
        if cap is not None and cap < 1:
            raise ValueError(f'max_concurrency must be at least 1, got {cap}')
        self.cap = cap
        self.actions = actions_of(type(self.behavior))
        self._is_async = {n: inspect.iscoroutinefunction(f) for n, f in self.actions.items()}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started = threading.Event()
        self.terminate = False
        self.failure: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._active: dict[tuple[str, int], ActionContext] = {}
        self._recent: collections.OrderedDict[tuple[str, int], None] = collections.OrderedDict()
        self._early_cancels: collections.OrderedDict[tuple[str, int], None] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: collections.deque[ActionContext] = collections.deque()
        # Counts an agent_stats request answers with ('outgoing' is counted by the
        # handles its actions use: see ActionContext.stats).
        self.stats = {'incoming': 0, 'outgoing': 0, 'completed': 0}
        self._stopping = False
        self._idle: asyncio.Event | None = None
        self._pending_stop: tuple[bool, BaseException | None] | None = None
        self._journal: Journal | None = None
        # A daemon's counters, shared with its supervisor (None: no metrics).
        self._metrics = open_for_agent(self.agent_id, list(self.actions))

    # Control from other threads --------------------------------------------------------

    def request_shutdown(
        self, *, terminate: bool = True, failure: BaseException | None = None
    ) -> None:
        """Stop the agent (thread-safe); ``terminate`` closes its mailbox for good."""
        loop = self.loop
        if loop is None:
            self._pending_stop = (terminate, failure)
            return
        loop.call_soon_threadsafe(self._begin_stop, terminate, failure)

    def _begin_stop(self, terminate: bool, failure: BaseException | None) -> None:
        self.terminate = self.terminate or terminate
        if failure is not None and self.failure is None:
            self.failure = failure
        if self._stop is not None:
            self._stop.set()

    # Running ------------------------------------------------------------------------------

    def run(self) -> None:
        """Run the agent in this thread until it stops.

        Raises:
            LoopError: (or the error of ``on_setup``) when the agent failed; a launcher
                with a restart policy then restarts it.
        """
        asyncio.run(self._main())
        if self.failure is not None:
            raise self.failure

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        exchange_context.set(self.exchange)  # Handle(agent_id) in actions and loops
        self._stop = asyncio.Event()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f'agent-{self.agent_id[6:14]}-setup'
        )
        self._workers = Workers(self.cap or 32, f'agent-{self.agent_id[6:14]}')
        context = AgentContext(self)
        self.behavior.__dict__['_tether_context'] = context
        transport = self.exchange.transport()
        self.transport = transport
        listener = None
        loops = ControlLoops(self.behavior, self.agent_id, self.exchange.clock, self._loop_failed)
        try:
            if self.spec.journal is not None:
                # Requests an earlier incarnation accepted and never answered (its
                # launcher normally answers them first).
                answer_lost(self.exchange, self.agent_id, self.spec.journal, 'found at restart')
                self._journal = Journal(self.spec.journal)
                # What an earlier incarnation accepted is not run again if it comes back
                # (sent again through Redis because it was not acknowledged).
                for key in self._journal.seen[-_RECENT:]:
                    self._recent[key] = None
            for hook in ('on_setup', 'agent_on_startup'):
                try:
                    await self._call(getattr(self.behavior, hook))
                except BaseException as e:
                    failure = AgentLaunchError(
                        f'{hook} of agent {self.agent_id} ({type(self.behavior).__name__}) '
                        f'raised {e!r}',
                    )
                    failure.__cause__ = e
                    raise failure from e
            if self._pending_stop is not None:
                self._begin_stop(*self._pending_stop)
            listener = transport.listen(self.agent_id, self._deliver)
            loops.start(self._stop)
            self.started.set()
            logger.info('agent %s (%s) started', self.agent_id, type(self.behavior).__name__)
            await self._stop.wait()
        except BaseException as e:
            if self.failure is None:
                self.failure = e
        finally:
            self.started.set()
            if listener is not None:
                listener.close()
            await self._drain()
            loops.stop_threads()
            await loops.join()
            for hook in ('agent_on_shutdown', 'on_shutdown'):
                try:
                    await self._call(getattr(self.behavior, hook))
                except Exception as e:
                    logger.exception('%s of agent %s failed', hook, self.agent_id)
                    if self.failure is None:
                        self.failure = e
            context._close()
            self._workers.shutdown()
            self._pool.shutdown(wait=True)
            if self.terminate and self.failure is None:
                try:
                    transport.terminate(self.agent_id)
                except TetherError:
                    logger.warning('could not terminate the mailbox of %s', self.agent_id)
            self.behavior.__dict__.pop('_tether_context', None)
            if self._journal is not None:
                self._journal.close()
            logger.info('agent %s stopped', self.agent_id)

    async def _call(self, fn: Callable[[], Any]) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, contextvars.copy_context().run, fn)

    async def _drain(self) -> None:
        """Answer what waits, cancel async actions, let synchronous ones finish."""
        with self._lock:
            self._stopping = True
            waiting = list(self._waiting)
            self._waiting.clear()
            running = [c for c in self._active.values() if c.started]
            for ctx in waiting:
                self._forget(ctx)
            busy = self._running > 0
            if busy:
                self._idle = asyncio.Event()
        for ctx in waiting:
            self._reply_shut_down(ctx, 'before the action ran')
        for ctx in running:
            if ctx.is_async and ctx.task is not None:
                ctx.task.cancel()
        if busy and self._idle is not None:
            await self._idle.wait()

    def _loop_failed(self, name: str, error: BaseException) -> None:
        logger.error('loop %s of agent %s raised %r', name, self.agent_id, error)
        if getattr(self.behavior, 'shutdown_on_loop_error', True):
            failure = LoopError(f'loop {name!r} of agent {self.agent_id} raised {error!r}')
            failure.__cause__ = error
            self.request_shutdown(terminate=False, failure=failure)

    # Messages -------------------------------------------------------------------------
    #
    # Delivery runs in whatever thread the exchange delivers from. A synchronous action is
    # handed to the thread pool straight from there (no hop through the event loop); an
    # async action becomes a task on the agent's loop. One lock-protected counter keeps
    # the number of running actions at or under the cap; requests over it wait in order.

    def _deliver(self, item: Message | Rejected) -> None:
        try:
            self._dispatch(item)
        except Exception:
            logger.exception('agent %s failed to dispatch a message', self.agent_id)

    def _reply_shut_down(self, ctx: ActionContext, when: str) -> None:
        """Tell a request's caller (unless it cancelled) that the agent shut down ``when``."""
        if not ctx.cancelled:
            error = AgentError(f'agent {self.agent_id} shut down {when}')
            self._reply(ctx.caller, ctx.tag, error=error)

    def _reply(
        self, msg_src: str, tag: int, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        if error is not None:
            reply = Response(self.agent_id, msg_src, tag, error=error_info(error))
        else:
            reply = Response(self.agent_id, msg_src, tag, result)
        try:
            self.transport.send(reply)
        except TetherError as e:
            if error is None:
                # The result could not be sent (not encodable ...): say so instead.
                logger.warning('agent %s could not send a result: %s', self.agent_id, e)
                self._reply(msg_src, tag, error=e)
            else:
                logger.warning('agent %s could not answer %s: %s', self.agent_id, msg_src, e)

    def _call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:
                logger.debug('agent %s is stopping; work dropped', self.agent_id)

    def _dispatch(self, item: Message | Rejected) -> None:
        if isinstance(item, Rejected):
            logger.warning('agent %s refused a message: %s', self.agent_id, item.error)
            if item.src is not None and item.tag is not None and item.kind != RESPONSE:
                self._reply(item.src, item.tag, error=item.error)
            return
        if type(item) is Request:
            self._request(item)
            return
        kind = item.kind
        if kind == PING:
            self._reply(item.src, item.tag)
        elif kind == DESCRIBE:
            info = describe_actions(type(self.behavior))
            self._reply(item.src, item.tag, result={n: i.to_json() for n, i in info.items()})
        elif kind == SHUTDOWN:
            self._reply(item.src, item.tag)
            self.request_shutdown(terminate=True)
        elif kind == STATS:
            with self._lock:
                counts = dict(self.stats)
                counts['in_progress'] = self._running
                counts['queued'] = sum(1 for c in self._waiting if not c.cancelled)
            self._reply(item.src, item.tag, result=counts)
        elif kind == STOP:
            self._reply(item.src, item.tag)
            self.request_shutdown(terminate=False)
        elif kind == CANCEL:
            self._cancel((item.src, item.tag))
        else:
            logger.warning('agent %s got an unexpected %s message', self.agent_id, kind)

    def _request(self, msg: Request) -> None:
        key = (msg.src, msg.tag)
        fn = self.actions.get(msg.action)
        if fn is None:
            known = ', '.join(sorted(self.actions)) or 'none'
            self._reply(
                msg.src,
                msg.tag,
                error=UnknownActionError(
                    f'agent {self.agent_id} ({type(self.behavior).__name__}) has no '
                    f'action {msg.action!r:.80}; its actions: {known}',
                ),
            )
            return
        ctx = ActionContext(msg.action, msg.src, msg.tag)
        ctx.stats = self.stats
        ctx.is_async = self._is_async[msg.action]
        ctx.msg = msg
        ctx.fn = fn
        with self._lock:
            if key in self._recent:
                return  # a duplicate (a direct send retried through the fallback)
            self._recent[key] = None
            if len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
            if self._early_cancels.pop(key, 0) is None:
                return
            stopping = self._stopping
            if not stopping:
                self.stats['incoming'] += 1
                self._active[key] = ctx
                run_now = self.cap is None or self._running < self.cap
                if self._journal is not None:
                    ctx.journal_line = self._journal.started(
                        msg.src, msg.tag, msg.action, flush=False, waiting=not run_now
                    )
                if run_now:
                    self._running += 1
                else:
                    ctx.waited = True
                    self._waiting.append(ctx)
                if self._metrics is not None:
                    self._metrics.load(self._running, len(self._waiting))
        if stopping:
            self._reply(
                msg.src, msg.tag, error=AgentError(f'agent {self.agent_id} is shutting down')
            )
            return
        if run_now:
            self._start(ctx)
        if self._journal is not None:
            # Written while the action's thread wakes up (that thread makes sure of it
            # too before it runs the action, so an action never runs before its line is
            # written), and before the exchange acknowledges the message.
            self._journal.ensure(ctx.journal_line)

    def _start(self, ctx: ActionContext) -> None:
        ctx.started = True
        if ctx.waited and self._journal is not None:
            # It waited for a slot: the journal says it starts now (before it runs), so
            # that a crash tells its caller whether it had started.
            self._journal.running(ctx.caller, ctx.tag)
        if ctx.is_async:
            self._call_soon(self._start_task, ctx)
        else:
            try:
                self._workers.submit(self._run_sync, ctx)
            except RuntimeError:
                self._finish(ctx)

    def _start_task(self, ctx: ActionContext) -> None:
        assert self.loop is not None
        ctx.task = self.loop.create_task(self._run_async(ctx))
        if ctx.cancelled:
            ctx.task.cancel()

    def _finish(self, ctx: ActionContext) -> None:
        """An action ended: free its slot, or hand the slot to the next waiting request."""
        nxt = None
        with self._lock:
            self.stats['completed'] += 1
            # The journal's finished line is written with the next accepted request (or
            # when the agent stops): a crash before that only makes the launcher answer
            # this request again, which its caller ignores.
            self._forget(ctx, flush=False)
            while self._waiting:
                candidate = self._waiting.popleft()
                if not candidate.cancelled:
                    nxt = candidate
                    break
            if nxt is None:
                self._running -= 1
                if self._running == 0 and self._idle is not None:
                    self._call_soon(self._idle.set)
            if self._metrics is not None:
                self._metrics.load(self._running, len(self._waiting))
        if nxt is not None:
            self._start(nxt)

    def _forget(self, ctx: ActionContext, *, flush: bool = True) -> None:
        """Drop an answered (or abandoned) request; call with ``self._lock`` held."""
        if self._active.pop((ctx.caller, ctx.tag), None) is not None and self._journal is not None:
            self._journal.finished(ctx.caller, ctx.tag, flush=flush)

    def _cancel(self, key: tuple[str, int]) -> None:
        with self._lock:
            ctx = self._active.get(key)
            if ctx is None:
                self._early_cancels[key] = None
                if len(self._early_cancels) > _RECENT:
                    self._early_cancels.popitem(last=False)
                return
            ctx.cancel_event.set()
            if not ctx.started:
                self._forget(ctx)
                return  # skipped when its turn comes
        if ctx.is_async:
            self._call_soon(self._cancel_task, ctx)

    @staticmethod
    def _cancel_task(ctx: ActionContext) -> None:
        if ctx.task is not None:
            ctx.task.cancel()

    async def _run_async(self, ctx: ActionContext) -> None:
        msg = ctx.msg
        _current.set(ctx)
        start, failed = time.perf_counter(), True
        try:
            if self._journal is not None:
                self._journal.ensure(ctx.journal_line)  # its line first (see _request)
            result = await ctx.fn.__get__(self.behavior)(*msg.args, **_kwargs(ctx))
            failed = False
        except asyncio.CancelledError:
            self._reply_shut_down(ctx, 'during the action')
        except Exception as e:
            self._reply(msg.src, msg.tag, error=e)
        except BaseException as e:  # SystemExit, KeyboardInterrupt ... (not a cancel)
            self._reply(msg.src, msg.tag, error=self._exit_raised(ctx, e))
        else:
            if not ctx.cancelled:
                self._reply(msg.src, msg.tag, result=result)
        finally:
            if self._metrics is not None:
                self._metrics.action(ctx.action, time.perf_counter() - start, failed=failed)
            self._finish(ctx)

    def _run_sync(self, ctx: ActionContext) -> None:
        msg = ctx.msg
        token = _current.set(ctx)
        exchange_token = exchange_context.set(self.exchange)
        start, failed = time.perf_counter(), True
        try:
            if self._journal is not None:
                self._journal.ensure(ctx.journal_line)  # its line first (see _request)
            result = ctx.fn.__get__(self.behavior)(*msg.args, **_kwargs(ctx))
            failed = False
        except Exception as e:
            self._reply(msg.src, msg.tag, error=e)
        except BaseException as e:  # SystemExit, KeyboardInterrupt ...
            self._reply(msg.src, msg.tag, error=self._exit_raised(ctx, e))
        else:
            self._reply(msg.src, msg.tag, result=result)
        finally:
            _current.reset(token)
            exchange_context.reset(exchange_token)
            if self._metrics is not None:
                self._metrics.action(ctx.action, time.perf_counter() - start, failed=failed)
            self._finish(ctx)

    def _exit_raised(self, ctx: ActionContext, error: BaseException) -> BaseException:
        """An action raised SystemExit, KeyboardInterrupt or another BaseException.

        Its caller is answered with it (rebuilt there as an ActionError naming the type,
        never raised as such) and the agent keeps serving: the exception came from one
        action's code, not from a signal to the agent.
        """
        logger.warning(
            'action %r of agent %s raised %r; its caller gets an error and the agent '
            'keeps running',
            ctx.action,
            self.agent_id,
            error,
        )
        return error


def _kwargs(ctx: ActionContext) -> dict[str, Any]:
    """The action's keyword arguments, with its context for ``@action(context=True)``."""
    kwargs: dict[str, Any] = ctx.msg.kwargs
    if getattr(ctx.fn, '_tether_action_context', False):
        return {**kwargs, 'context': ctx}
    return kwargs
