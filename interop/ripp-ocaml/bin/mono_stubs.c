/* CLOCK_MONOTONIC for deadlines: OCaml 4.13's Unix has only wall-clock
   time, which jumps when the system clock is set. */
#include <time.h>
#include <caml/mlvalues.h>
#include <caml/alloc.h>

value ripp_monotonic_ns(value unit)
{
    struct timespec ts;
    (void)unit;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return caml_copy_int64((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}
