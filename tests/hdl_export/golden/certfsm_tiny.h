/* certfsm: the certified machine of artifact sha256 0000000000000000000000000000000000000000000000000000000000000000 */
/* inputs: speed, load; grid 4 x 2 = 8 cells */
/* tokens: HOLD=0, FAST=5, SLOW=9 */
/* machine: n_tokens=3 conservative=0 legal=[0, 1, 2] overridable=[0, 2] confirm_cycles=2 cooldown_cycles=3 codes=[0, 5, 9] */
/* one decision per call: the Verilog's pipeline registers are computed in the same call */
/* MISRA C:2012: certfsm export-c --check runs cppcheck's misra addon on the header and the source and accepts these deviations, each justified, and nothing else: */
/* deviation: Rule 8.7: certfsm_tiny_reset and certfsm_tiny_step have external linkage because they are the interface: the integrator's translation units call them, and the check sees the exported files alone */
/* Written by certfsm export-c from the artifact named above: the exported Verilog module's structure as C99, one decision per call. */
#ifndef CERTFSM_TINY_H
#define CERTFSM_TINY_H

#include <stdint.h>

/* The machine's state registers (certfsm.machine.State; candidate is 0 when candidate_valid is 0). */
typedef struct {
    uint32_t current;
    uint32_t candidate_valid;
    uint32_t candidate;
    uint32_t count;
    uint32_t cooldown;
} certfsm_tiny_state;

/* One reading: each bus is the integer v meaning v * 2^-frac_bits. */
typedef struct {
    int32_t speed;  /* speed as v * 2^-2 m/s */
    int32_t load;  /* load as v * 2^-0 % */
    uint32_t in_valid;  /* 1: this is a reading, decide; 0: leave the state and the outputs */
    uint32_t sla_ok;  /* the SLA holds for this reading */
    uint32_t override_request;  /* an operator override is requested this cycle */
    uint32_t override_code;  /* the 4-bit code of the requested token */
} certfsm_tiny_input;

/* The decision; left unchanged by a call with in_valid 0 (out_valid then 0). */
typedef struct {
    uint32_t token_code;  /* the emitted token's code (the new current token) */
    uint32_t reason_code;  /* why (certfsm.machine.Reason) */
    uint32_t cell_index;  /* the reading's flat cell index; all ones out of envelope */
    uint32_t out_valid;  /* 1 when this call decided (in_valid was 1), else 0 */
} certfsm_tiny_output;

/* The initial state and the reset outputs. */
void certfsm_tiny_reset(certfsm_tiny_state *state, certfsm_tiny_output *out);
/* One decision: the next state and the outputs for one reading. */
void certfsm_tiny_step(certfsm_tiny_state *state, const certfsm_tiny_input *in, certfsm_tiny_output *out);

#endif /* CERTFSM_TINY_H */
