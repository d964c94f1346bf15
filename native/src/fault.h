/* fault.h - turns a SIGBUS on the engine's mapped shards into a failed forward pass instead
 * of a dead process. A mapped shard that shrinks while the engine runs (a model folder
 * updated in place, a network file system losing the file) makes every read past its new
 * end fault with SIGBUS; the default action kills the host (`k3 serve`, the language
 * server). It does not decide what a fault means for the model (model.c and forward.c do).
 *
 * How: safetensors.c registers each shard's mapping here; the first registration installs
 * a process-wide SIGBUS handler (SA_NODEFER, so jumping out of it leaves the thread's
 * signal mask as it was). A thread that reads mapped weights first arms a recovery point
 * (FAULT_CATCH); a fault whose address lies inside a registered mapping, on a thread with
 * a point armed, jumps back to that point with the address (siglongjmp), disarming it.
 * Anything else (an address outside the mappings, a thread with no point, a SIGBUS sent by
 * kill) goes to the handler that was installed before, or to the default action: the
 * process dies as it would have without this module.
 *
 * Points nest: a function that holds something across mapped reads (a lock, a borrowed
 * trunk layer, an expert-cache batch) arms its own point, lets go of what it holds when
 * it catches, and passes the fault outward with fault_escape(). Worker threads of the
 * pool never jump across the pool: they catch, report to the loop's caller, and the
 * caller escapes once every worker has left the loop (threads.c).
 *
 * What it cannot do: a fault while the checkpoint is being opened (st_open, binding) or on
 * a thread the engine does not run is not caught. More than FAULT_MAX_RANGES mappings at
 * once are not all registered (those beyond fault as before). */
#ifndef K3_FAULT_H
#define K3_FAULT_H

#include <setjmp.h>
#include <stddef.h>

/* How many mappings can be registered at once (shards of every model open in a process). */
#define FAULT_MAX_RANGES 1024

/* One recovery point, on the stack of the function that arms it. */
typedef struct fault_point {
    sigjmp_buf jump;
    const void *volatile addr;  /* the faulting address, once caught */
    struct fault_point *outer;  /* the point armed before this one on the thread */
} fault_point;

/* Arms pt on the calling thread and returns 0; returns again, nonzero, when a fault on
 * the mappings (or fault_escape) jumps back, pt then disarmed and pt->addr set. Locals
 * the caller changes after arming and reads after the jump must be volatile. A macro
 * because sigsetjmp must run in the frame that stays alive. */
#define FAULT_CATCH(pt) (fault_arm(pt), sigsetjmp((pt)->jump, 0))

/* Makes pt the thread's current point (its outer one is the previous current). */
void fault_arm(fault_point *pt);

/* Disarms pt, which must be the thread's current point: its outer one is current again. */
void fault_disarm(fault_point *pt);

/* From ordinary code (not the handler): jumps to the thread's current point as a fault at
 * addr would. With no point armed the fault cannot be passed on: the process is ended by
 * SIGBUS's default action, as without this module. */
_Noreturn void fault_escape(const void *addr);

/* Registers [base, base + len) as engine-mapped (installing the handler on first use);
 * 0, or -1 when the table is full (faults there then kill the process as before). */
int fault_register(const void *base, size_t len);

/* Forgets the mapping at base (before it is unmapped). */
void fault_unregister(const void *base);

#endif
