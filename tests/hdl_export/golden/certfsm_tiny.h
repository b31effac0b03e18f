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

/* Token codes: token_code and override_code carry these 4-bit codes (the artifact's codes). */
#define CERTFSM_TOKEN_HOLD 0u  /* token HOLD, output index 0; the conservative token; overridable */
#define CERTFSM_TOKEN_FAST 5u  /* token FAST, output index 1 */
#define CERTFSM_TOKEN_SLOW 9u  /* token SLOW, output index 2; overridable */

/* Reason codes: reason_code says why a call emitted token_code (certfsm.machine.Reason): the first rule that applies decides, in the order fallback, legality, override, table. After a reset it is 0 with out_valid 0. */
#define CERTFSM_REASON_KEEP_CURRENT 0u  /* kept the current token: the table proposes it */
#define CERTFSM_REASON_SWITCH 1u  /* switched to the table's proposal: proposed confirm_cycles calls in a row, cooldown expired */
#define CERTFSM_REASON_HOLD_CONFIRMING 2u  /* kept the current token: the table proposes another, not yet confirm_cycles calls in a row */
#define CERTFSM_REASON_HOLD_COOLDOWN 3u  /* kept the current token: the table's proposal is confirmed but the cooldown runs */
#define CERTFSM_REASON_MOVE_DOWN 4u  /* moved to the conservative token at once: the table proposes it */
#define CERTFSM_REASON_LEGALITY_PREEMPT 5u  /* moved to the conservative token at once: the current token is not allowed in the cell */
#define CERTFSM_REASON_FALLBACK_ENVELOPE 6u  /* the conservative token: the reading is out of the envelope (cell_index all ones) */
#define CERTFSM_REASON_FALLBACK_SLA 7u  /* the conservative token: sla_ok was 0 for a reading in the envelope */
#define CERTFSM_REASON_OVERRIDE 8u  /* the override was obeyed: token_code is the requested token */
#define CERTFSM_REASON_OVERRIDE_WAITING 9u  /* an override to be obeyed waits for the cooldown: the current token is kept meanwhile */
#define CERTFSM_REASON_OVERRIDE_REFUSED_NOT_OVERRIDABLE 10u  /* the override was refused (override_code is no overridable token's code); the table decided token_code */
#define CERTFSM_REASON_OVERRIDE_REFUSED_FORBIDDEN 11u  /* the override was refused (its token is not allowed in the cell); the table decided token_code */

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
    uint32_t override_code;  /* the 4-bit code of the requested token (CERTFSM_TOKEN_* above); any other code is refused */
} certfsm_tiny_input;

/* The decision; left unchanged by a call with in_valid 0 (out_valid then 0). */
typedef struct {
    uint32_t token_code;  /* the emitted token's code (the new current token): one of the CERTFSM_TOKEN_* codes above */
    uint32_t reason_code;  /* why this call emitted token_code: one of the CERTFSM_REASON_* codes above */
    uint32_t cell_index;  /* the reading's flat cell index; all ones out of envelope */
    uint32_t out_valid;  /* 1 when this call decided (in_valid was 1), else 0 */
} certfsm_tiny_output;

/* The initial state and the reset outputs. */
void certfsm_tiny_reset(certfsm_tiny_state *state, certfsm_tiny_output *out);
/* One decision: the next state and the outputs for one reading. */
void certfsm_tiny_step(certfsm_tiny_state *state, const certfsm_tiny_input *in, certfsm_tiny_output *out);

#endif /* CERTFSM_TINY_H */
