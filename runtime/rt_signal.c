/*
** rt_signal.c -- interrupts: td_interrupt() asks the running computation to
** stop, and the dispatcher's next op fails with "interrupted" (one relaxed
** atomic load per op when nothing is pending). A REPL or a host turns SIGINT
** into this request with td_interrupt_catch or by calling td_interrupt() from
** its own handler; a loop of tensor ops then stops within one op, even inside
** LuaJIT-compiled code, which never runs debug hooks.
*/
#include "rt.h"
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

_Atomic int rt_interrupt_flag;
_Thread_local int rt_interrupt_hold;

/* async-signal-safe: one lock-free atomic store */
TD_API void td_interrupt(void) { atomic_store_explicit(&rt_interrupt_flag, 1, memory_order_relaxed); }

TD_API int td_interrupt_pending(int clear)
{
  if (clear) return atomic_exchange_explicit(&rt_interrupt_flag, 0, memory_order_relaxed);
  return atomic_load_explicit(&rt_interrupt_flag, memory_order_relaxed);
}

/* The dispatcher saw the flag: take it (another thread may have) and fail. */
int rt_interrupted(void)
{
  if (rt_interrupt_hold || !atomic_exchange_explicit(&rt_interrupt_flag, 0, memory_order_relaxed)) return 0;
  rt_err(TD_ERR_INTERRUPTED, "interrupted");
  return 1;
}

/* -- SIGINT ------------------------------------------------------------------------------- */

static struct sigaction sig_prev;
static int sig_on;

/* A second SIGINT while the first request is still pending means the work
** does not check (a loop with no op in it): the previous handler takes it
** (by default the process ends, as a second Ctrl-C in luajit). */
static void sig_handler(int sig)
{
  if (atomic_exchange_explicit(&rt_interrupt_flag, 1, memory_order_relaxed)) {
    sigaction(SIGINT, &sig_prev, NULL);
    sig_on = 0;
    raise(sig);
  }
}

/* No SA_RESTART: a blocking read or poll returns EINTR, so a prompt waiting
** for input sees the Ctrl-C at once. */
TD_API int td_interrupt_catch(int on)
{
  if (on && !sig_on) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sig_handler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, &sig_prev)) return rt_err(TD_ERR_STATE, "interrupt_catch: sigaction failed");
    sig_on = 1;
  } else if (!on && sig_on) {
    if (sigaction(SIGINT, &sig_prev, NULL)) return rt_err(TD_ERR_STATE, "interrupt_catch: sigaction failed");
    sig_on = 0;
  }
  return 0;
}

/* -- Version -------------------------------------------------------------------------------- */

TD_API const char *td_version_string(void) { return TIDE_VERSION; }
