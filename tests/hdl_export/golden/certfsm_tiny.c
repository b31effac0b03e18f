/* certfsm: the certified machine of artifact sha256 0000000000000000000000000000000000000000000000000000000000000000 */
/* inputs: speed, load; grid 4 x 2 = 8 cells */
/* tokens: HOLD=0, FAST=5, SLOW=9 */
/* machine: n_tokens=3 conservative=0 legal=[0, 1, 2] overridable=[0, 2] confirm_cycles=2 cooldown_cycles=3 codes=[0, 5, 9] */
/* one decision per call: the Verilog's pipeline registers are computed in the same call */
/* MISRA C:2012: certfsm export-c --check runs cppcheck's misra addon on the header and the source and accepts these deviations, each justified, and nothing else: */
/* deviation: Rule 8.7: certfsm_tiny_reset and certfsm_tiny_step have external linkage because they are the interface: the integrator's translation units call them, and the check sees the exported files alone */
#include "certfsm_tiny.h"

#define CONSERVATIVE 0u  /* output index of HOLD, the conservative token */
#define CONFIRM_CYCLES 2u  /* a new token must be proposed this often */
#define COOLDOWN_CYCLES 3u  /* cycles between switches */
#define OVERRIDABLE 5u  /* bit t: output index t may be forced by an override (HOLD, SLOW) */
#define NO_CELL 15u  /* the cell output out of envelope */

void certfsm_tiny_reset(certfsm_tiny_state *state, certfsm_tiny_output *out)
{
    state->current = 0u;
    state->candidate_valid = 0u;
    state->candidate = 0u;
    state->count = 0u;
    state->cooldown = 0u;
    out->token_code = CERTFSM_TOKEN_HOLD;
    out->reason_code = 0u;
    out->cell_index = 15u;
    out->out_valid = 0u;
}

void certfsm_tiny_step(certfsm_tiny_state *state, const certfsm_tiny_input *in, certfsm_tiny_output *out)
{
    /* the certified table: the proposed output index of every cell, with its bounds and status */
    static const uint8_t table_rom[8] = {
        0u,  /* cell 0: speed in [-2, -0.5), load in [0, 10): exact HOLD */
        0u,  /* cell 1: speed in [-2, -0.5), load in [10, 20]: conservative HOLD */
        2u,  /* cell 2: speed in [-0.5, 0), load in [0, 10): exact SLOW */
        0u,  /* cell 3: speed in [-0.5, 0), load in [10, 20]: exact HOLD */
        1u,  /* cell 4: speed in [0, 1.25), load in [0, 10): exact FAST */
        2u,  /* cell 5: speed in [0, 1.25), load in [10, 20]: conservative SLOW */
        1u,  /* cell 6: speed in [1.25, 3], load in [0, 10): exact FAST */
        1u,  /* cell 7: speed in [1.25, 3], load in [10, 20]: exact FAST */
    };
    /* bit t: output index t may be emitted in the cell (the legality rules) */
    static const uint8_t mask_rom[8] = {
        7u,  /* cell 0: allowed HOLD, FAST, SLOW */
        5u,  /* cell 1: allowed HOLD, SLOW */
        7u,  /* cell 2: allowed HOLD, FAST, SLOW */
        7u,  /* cell 3: allowed HOLD, FAST, SLOW */
        3u,  /* cell 4: allowed HOLD, FAST */
        7u,  /* cell 5: allowed HOLD, FAST, SLOW */
        3u,  /* cell 6: allowed HOLD, FAST */
        3u,  /* cell 7: allowed HOLD, FAST */
    };
    const int32_t speed = in->speed;
    const int32_t load = in->load;
    const uint32_t in_valid = in->in_valid;
    const uint32_t sla_ok = in->sla_ok;
    const uint32_t override_request = in->override_request;
    const uint32_t override_code = in->override_code;
    const uint32_t current = state->current;
    const uint32_t candidate_valid = state->candidate_valid;
    const uint32_t candidate = state->candidate;
    const uint32_t count = state->count;
    const uint32_t cooldown = state->cooldown;
    /* speed: v means v * 2^-2; threshold = ceil(edge * 2^2); envelope -8 .. 12 */
    const uint32_t speed_in_envelope = (((speed >= -8) && (speed <= 12)) ? 1u : 0u);
    uint32_t speed_bin;
    if (speed >= 5) {  /* [1.25, 3] */
        speed_bin = 3u;
    } else if (speed >= 0) {  /* [0, 1.25) */
        speed_bin = 2u;
    } else if (speed >= -2) {  /* [-0.5, 0) */
        speed_bin = 1u;
    } else {  /* [-2, -0.5) */
        speed_bin = 0u;
    }
    /* load: v means v * 2^-0; threshold = ceil(edge * 2^0); envelope 0 .. 20 */
    const uint32_t load_in_envelope = (((load >= 0) && (load <= 20)) ? 1u : 0u);
    uint32_t load_bin;
    if (load >= 10) {  /* [10, 20] */
        load_bin = 1u;
    } else {  /* [0, 10) */
        load_bin = 0u;
    }
    /* every input inside its envelope */
    const uint32_t in_envelope = (((speed_in_envelope != 0u) && (load_in_envelope != 0u)) ? 1u : 0u);
    /* the flat cell index, C order (the last input varies fastest) */
    const uint32_t reading_cell = ((((speed_bin * 2u) & 0xFu) + load_bin) & 0xFu);
    /* table_word: table_rom[reading_cell], and past the table (no cell: reading_cell is always below 8, so never read; cell 0's word) */
    const uint32_t table_word = ((reading_cell < 8u) ? table_rom[reading_cell] : 0u);
    /* mask_word: mask_rom[reading_cell], and past the table (no cell: reading_cell is always below 8, so never read; cell 0's word) */
    const uint32_t mask_word = ((reading_cell < 8u) ? mask_rom[reading_cell] : 7u);
    /* valid_q: a reading was sampled at the last edge */
    const uint32_t valid_q = in_valid;
    /* in_envelope_q: it was inside the envelope */
    const uint32_t in_envelope_q = in_envelope;
    /* cell_q: its cell, or NO_CELL */
    const uint32_t cell_q = ((in_envelope != 0u) ? reading_cell : NO_CELL);
    /* sla_ok_q: sampled with the reading */
    const uint32_t sla_ok_q = sla_ok;
    /* override_request_q: sampled with the reading */
    const uint32_t override_request_q = override_request;
    /* override_code_q: sampled with the reading */
    const uint32_t override_code_q = override_code;
    /* proposal_q: the table's proposal for the cell (synchronous ROM read: block RAM) */
    const uint32_t proposal_q = table_word;
    /* allowed_q: the cell's allowed mask (synchronous ROM read: block RAM) */
    const uint32_t allowed_q = mask_word;
    /* the output index whose code was requested */
    uint32_t override_token;
    switch (override_code_q) {
    case CERTFSM_TOKEN_HOLD: override_token = 0u; break;  /* HOLD */
    case CERTFSM_TOKEN_FAST: override_token = 1u; break;  /* FAST */
    case CERTFSM_TOKEN_SLOW: override_token = 2u; break;  /* SLOW */
    default: override_token = 0u; break;
    }
    /* the requested code is some token's code */
    uint32_t override_is_token;
    switch (override_code_q) {
    case CERTFSM_TOKEN_HOLD: override_is_token = 1u; break;  /* HOLD */
    case CERTFSM_TOKEN_FAST: override_is_token = 1u; break;  /* FAST */
    case CERTFSM_TOKEN_SLOW: override_is_token = 1u; break;  /* SLOW */
    default: override_is_token = 0u; break;
    }
    /* the cooldown counted down by one, never below 0 */
    const uint32_t counted_down = ((cooldown == 0u) ? 0u : ((cooldown - 1u) & 0x3u));
    /* a switch may happen this cycle */
    const uint32_t cooldown_expired = ((counted_down == 0u) ? 1u : 0u);
    /* the current token is allowed in the cell */
    const uint32_t current_allowed = ((allowed_q >> current) & 1u);
    /* an override of an overridable token allowed in the cell */
    const uint32_t override_obeyable = ((((override_request_q != 0u) && ((override_is_token != 0u) && (((OVERRIDABLE >> override_token) & 1u) != 0u))) && (((allowed_q >> override_token) & 1u) != 0u)) ? 1u : 0u);
    /* the reason reported when a requested override is not obeyed */
    const uint32_t override_refusal = (((override_is_token != 0u) && (((OVERRIDABLE >> override_token) & 1u) != 0u)) ? CERTFSM_REASON_OVERRIDE_REFUSED_FORBIDDEN : CERTFSM_REASON_OVERRIDE_REFUSED_NOT_OVERRIDABLE);
    /* how many consecutive cycles the proposal has been seen, saturating at CONFIRM_CYCLES */
    const uint32_t proposal_count = (((candidate_valid != 0u) && (candidate == proposal_q)) ? ((count >= CONFIRM_CYCLES) ? CONFIRM_CYCLES : ((count + 1u) & 0x3u)) : 1u);
    /* the proposal is confirmed */
    const uint32_t confirmed = ((proposal_count >= CONFIRM_CYCLES) ? 1u : 0u);
    /* one step of certfsm.machine.step, tested in its order, the first rule that holds wins (numbers: the rules in certfsm.machine's docstring); a requested override that is not obeyed leaves the table path to decide and reports the refusal as the reason */
    uint32_t next_current;
    uint32_t next_candidate_valid;
    uint32_t next_candidate;
    uint32_t next_count;
    uint32_t next_cooldown;
    uint32_t next_reason;
    if (in_envelope_q == 0u) {  /* 1. out of envelope: the conservative token, cooldown restarts */
        next_current = CONSERVATIVE;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = COOLDOWN_CYCLES;
        next_reason = CERTFSM_REASON_FALLBACK_ENVELOPE;
    } else if (sla_ok_q == 0u) {  /* 1. SLA violated: the conservative token, cooldown restarts */
        next_current = CONSERVATIVE;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = COOLDOWN_CYCLES;
        next_reason = CERTFSM_REASON_FALLBACK_SLA;
    } else if (current_allowed == 0u) {  /* 2. current token forbidden in this cell: pre-empt to the conservative token */
        next_current = CONSERVATIVE;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = COOLDOWN_CYCLES;
        next_reason = CERTFSM_REASON_LEGALITY_PREEMPT;
    } else if ((override_obeyable != 0u) && (override_token == current)) {  /* 3. override of the current token: keep it */
        next_current = current;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = counted_down;
        next_reason = CERTFSM_REASON_OVERRIDE;
    } else if ((override_obeyable != 0u) && ((override_token == CONSERVATIVE) || (cooldown_expired != 0u))) {  /* 3. override to the conservative token, or with the cooldown expired: obey */
        next_current = override_token;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = COOLDOWN_CYCLES;
        next_reason = CERTFSM_REASON_OVERRIDE;
    } else if (override_obeyable != 0u) {  /* 3. override waits for the cooldown */
        next_current = current;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = counted_down;
        next_reason = CERTFSM_REASON_OVERRIDE_WAITING;
    } else if (proposal_q == current) {  /* 6. the table proposes the current token: keep it */
        next_current = current;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = counted_down;
        next_reason = ((override_request_q != 0u) ? override_refusal : CERTFSM_REASON_KEEP_CURRENT);
    } else if (proposal_q == CONSERVATIVE) {  /* 4. the table proposes the conservative token: move down at once */
        next_current = CONSERVATIVE;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = COOLDOWN_CYCLES;
        next_reason = ((override_request_q != 0u) ? override_refusal : CERTFSM_REASON_MOVE_DOWN);
    } else if ((confirmed != 0u) && (cooldown_expired != 0u)) {  /* 5. proposal confirmed and cooldown expired: switch */
        next_current = proposal_q;
        next_candidate_valid = 0u;
        next_candidate = 0u;
        next_count = 0u;
        next_cooldown = COOLDOWN_CYCLES;
        next_reason = ((override_request_q != 0u) ? override_refusal : CERTFSM_REASON_SWITCH);
    } else if (confirmed == 0u) {  /* 5. proposal not yet confirmed: hold and count */
        next_current = current;
        next_candidate_valid = 1u;
        next_candidate = proposal_q;
        next_count = proposal_count;
        next_cooldown = counted_down;
        next_reason = ((override_request_q != 0u) ? override_refusal : CERTFSM_REASON_HOLD_CONFIRMING);
    } else {  /* 5. confirmed, cooldown running: hold */
        next_current = current;
        next_candidate_valid = 1u;
        next_candidate = proposal_q;
        next_count = proposal_count;
        next_cooldown = counted_down;
        next_reason = ((override_request_q != 0u) ? override_refusal : CERTFSM_REASON_HOLD_COOLDOWN);
    }
    /* the code of the token emitted this cycle */
    uint32_t next_token_code;
    switch (next_current) {
    case 0u: next_token_code = CERTFSM_TOKEN_HOLD; break;  /* HOLD */
    case 1u: next_token_code = CERTFSM_TOKEN_FAST; break;  /* FAST */
    case 2u: next_token_code = CERTFSM_TOKEN_SLOW; break;  /* SLOW */
    default: next_token_code = CERTFSM_TOKEN_HOLD; break;
    }
    /* the registers load: the state and the outputs */
    if (valid_q != 0u) {
        state->current = next_current;
        state->candidate_valid = next_candidate_valid;
        state->candidate = next_candidate;
        state->count = next_count;
        state->cooldown = next_cooldown;
        out->token_code = next_token_code;
        out->reason_code = next_reason;
        out->cell_index = cell_q;
    }
    out->out_valid = valid_q;
}
