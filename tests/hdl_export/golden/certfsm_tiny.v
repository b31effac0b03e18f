// certfsm: the certified machine of artifact sha256 0000000000000000000000000000000000000000000000000000000000000000
// inputs: speed, load; grid 4 x 2 = 8 cells
// tokens: HOLD=0, FAST=5, SLOW=9
// machine: n_tokens=3 conservative=0 legal=[0, 1, 2] overridable=[0, 2] confirm_cycles=2 cooldown_cycles=3 codes=[0, 5, 9]
// latency: 2 cycles (reading sampled at edge n, decision on the outputs after edge n + 1); one decision per clock
// Written by certfsm export-verilog from the artifact named above; every ROM line names its cell.

`default_nettype none

module certfsm_tiny (
    input  wire clk,                            // rising-edge clock
    input  wire rst,                            // synchronous reset, active high
    input  wire signed [4:0] speed,             // speed as v * 2^-2 m/s
    input  wire [4:0] load,                     // load as v * 2^-0 %
    input  wire in_valid,                       // the inputs of this cycle are one reading
    input  wire sla_ok,                         // the SLA holds for this reading
    input  wire override_request,               // an operator override is requested this cycle
    input  wire [3:0] override_code,            // the 4-bit code of the requested token
    output reg  [3:0] token_code,               // the emitted token's code (the new current token)
    output reg  [3:0] reason_code,              // why (certfsm.machine.Reason)
    output reg  [3:0] cell_index,               // the reading's flat cell index; all ones out of envelope
    output reg  out_valid                       // the outputs hold a decision (2 cycles after in_valid)
);
    localparam [1:0] CONSERVATIVE = 2'd0;               // output index of HOLD, the conservative token
    localparam [1:0] CONFIRM_CYCLES = 2'd2;             // a new token must be proposed this often
    localparam [1:0] COOLDOWN_CYCLES = 2'd3;            // cycles between switches
    localparam [2:0] OVERRIDABLE = 3'd5;                // bit t: output index t may be forced by an override (HOLD, SLOW)
    localparam [3:0] NO_CELL = 4'd15;                   // the cell output out of envelope
    localparam [3:0] REASON_KEEP_CURRENT = 4'd0;
    localparam [3:0] REASON_SWITCH = 4'd1;
    localparam [3:0] REASON_HOLD_CONFIRMING = 4'd2;
    localparam [3:0] REASON_HOLD_COOLDOWN = 4'd3;
    localparam [3:0] REASON_MOVE_DOWN = 4'd4;
    localparam [3:0] REASON_LEGALITY_PREEMPT = 4'd5;
    localparam [3:0] REASON_FALLBACK_ENVELOPE = 4'd6;
    localparam [3:0] REASON_FALLBACK_SLA = 4'd7;
    localparam [3:0] REASON_OVERRIDE = 4'd8;
    localparam [3:0] REASON_OVERRIDE_WAITING = 4'd9;
    localparam [3:0] REASON_OVERRIDE_REFUSED_NOT_OVERRIDABLE = 4'd10;
    localparam [3:0] REASON_OVERRIDE_REFUSED_FORBIDDEN = 4'd11;

    reg  [1:0] speed_bin;
    wire speed_in_envelope;
    reg  load_bin;
    wire load_in_envelope;
    wire in_envelope;
    wire [3:0] reading_cell;
    reg  [1:0] table_word;
    reg  [2:0] mask_word;
    reg  valid_q;
    reg  in_envelope_q;
    reg  [3:0] cell_q;
    reg  sla_ok_q;
    reg  override_request_q;
    reg  [3:0] override_code_q;
    reg  [1:0] proposal_q;
    reg  [2:0] allowed_q;
    reg  [1:0] current;
    reg  candidate_valid;
    reg  [1:0] candidate;
    reg  [1:0] count;
    reg  [1:0] cooldown;
    reg  [1:0] override_token;
    reg  override_is_token;
    wire [1:0] counted_down;
    wire cooldown_expired;
    wire current_allowed;
    wire override_obeyable;
    wire [3:0] override_refusal;
    wire [1:0] proposal_count;
    wire confirmed;
    reg  [1:0] next_current;
    reg  next_candidate_valid;
    reg  [1:0] next_candidate;
    reg  [1:0] next_count;
    reg  [1:0] next_cooldown;
    reg  [3:0] next_reason;
    reg  [3:0] next_token_code;

    // speed m/s: bus value v means v * 2^-2; threshold = ceil(edge * 2^2), so v >= threshold exactly when v * 2^-2 >= edge
    // envelope [-2, 3] m/s = -8 .. 12; 4 bins
    assign speed_in_envelope = (speed >= -5'sd8) && (speed <= 5'sd12);
    always @* begin
        if (speed >= 5'sd5) speed_bin = 2'd3;  // [1.25, 3]
        else if (speed >= 5'sd0) speed_bin = 2'd2;  // [0, 1.25)
        else if (speed >= -5'sd2) speed_bin = 2'd1;  // [-0.5, 0)
        else speed_bin = 2'd0;  // [-2, -0.5)
    end

    // load %: bus value v means v * 2^-0; threshold = ceil(edge * 2^0), so v >= threshold exactly when v * 2^-0 >= edge
    // envelope [0, 20] % = 0 .. 20; 2 bins
    assign load_in_envelope = (load <= 5'd20);
    always @* begin
        if (load >= 5'd10) load_bin = 1'd1;  // [10, 20]
        else load_bin = 1'd0;  // [0, 10)
    end

    // every input inside its envelope
    assign in_envelope = (speed_in_envelope && load_in_envelope);

    // the flat cell index, C order (the last input varies fastest)
    assign reading_cell = (({2'd0, speed_bin} * 4'd2) + {3'd0, load_bin});

    // table_rom: the certified table: the proposed output index of every cell, with its bounds and status
    always @* begin
        case (reading_cell)
            4'd0:    table_word = 2'd0;  // cell 0: speed in [-2, -0.5), load in [0, 10): exact HOLD
            4'd1:    table_word = 2'd0;  // cell 1: speed in [-2, -0.5), load in [10, 20]: conservative HOLD
            4'd2:    table_word = 2'd2;  // cell 2: speed in [-0.5, 0), load in [0, 10): exact SLOW
            4'd3:    table_word = 2'd0;  // cell 3: speed in [-0.5, 0), load in [10, 20]: exact HOLD
            4'd4:    table_word = 2'd1;  // cell 4: speed in [0, 1.25), load in [0, 10): exact FAST
            4'd5:    table_word = 2'd2;  // cell 5: speed in [0, 1.25), load in [10, 20]: conservative SLOW
            4'd6:    table_word = 2'd1;  // cell 6: speed in [1.25, 3], load in [0, 10): exact FAST
            4'd7:    table_word = 2'd1;  // cell 7: speed in [1.25, 3], load in [10, 20]: exact FAST
            default: table_word = 2'd0;  // no cell: reading_cell is always below 8, so never read; cell 0's word
        endcase
    end

    // mask_rom: bit t: output index t may be emitted in the cell (the legality rules)
    always @* begin
        case (reading_cell)
            4'd0:    mask_word = 3'b111;  // cell 0: allowed HOLD, FAST, SLOW
            4'd1:    mask_word = 3'b101;  // cell 1: allowed HOLD, SLOW
            4'd2:    mask_word = 3'b111;  // cell 2: allowed HOLD, FAST, SLOW
            4'd3:    mask_word = 3'b111;  // cell 3: allowed HOLD, FAST, SLOW
            4'd4:    mask_word = 3'b011;  // cell 4: allowed HOLD, FAST
            4'd5:    mask_word = 3'b111;  // cell 5: allowed HOLD, FAST, SLOW
            4'd6:    mask_word = 3'b011;  // cell 6: allowed HOLD, FAST
            4'd7:    mask_word = 3'b011;  // cell 7: allowed HOLD, FAST
            default: mask_word = 3'b111;  // no cell: reading_cell is always below 8, so never read; cell 0's word
        endcase
    end

    // valid_q: a reading was sampled at the last edge
    always @(posedge clk) begin
        if (rst) begin
            valid_q <= 1'd0;
        end else begin
            valid_q <= in_valid;
        end
    end

    // in_envelope_q: it was inside the envelope
    // cell_q: its cell, or NO_CELL
    // proposal_q: the table's proposal for the cell (synchronous ROM read: block RAM)
    // allowed_q: the cell's allowed mask (synchronous ROM read: block RAM)
    always @(posedge clk) begin
        in_envelope_q <= in_envelope;
        cell_q <= (in_envelope ? reading_cell : NO_CELL);
        sla_ok_q <= sla_ok;
        override_request_q <= override_request;
        override_code_q <= override_code;
        proposal_q <= table_word;
        allowed_q <= mask_word;
    end

    // current: the current token
    // candidate_valid: a candidate is counted
    // candidate: the candidate token
    // count: cycles the candidate has been proposed
    // cooldown: cycles until a switch may happen
    always @(posedge clk) begin
        if (rst) begin
            current <= 2'd0;
            candidate_valid <= 1'd0;
            candidate <= 2'd0;
            count <= 2'd0;
            cooldown <= 2'd0;
        end else if (valid_q) begin
            current <= next_current;
            candidate_valid <= next_candidate_valid;
            candidate <= next_candidate;
            count <= next_count;
            cooldown <= next_cooldown;
        end
    end

    // the output index whose code was requested
    always @* begin
        case (override_code_q)
            4'd0: override_token = 2'd0;  // HOLD
            4'd5: override_token = 2'd1;  // FAST
            4'd9: override_token = 2'd2;  // SLOW
            default: override_token = 2'd0;
        endcase
    end

    // the requested code is some token's code
    always @* begin
        case (override_code_q)
            4'd0: override_is_token = 1'd1;  // HOLD
            4'd5: override_is_token = 1'd1;  // FAST
            4'd9: override_is_token = 1'd1;  // SLOW
            default: override_is_token = 1'd0;
        endcase
    end

    // the cooldown counted down by one, never below 0
    assign counted_down = ((cooldown == 2'd0) ? 2'd0 : (cooldown - 2'd1));

    // a switch may happen this cycle
    assign cooldown_expired = (counted_down == 2'd0);

    // the current token is allowed in the cell
    assign current_allowed = allowed_q[current];

    // an override of an overridable token allowed in the cell
    assign override_obeyable = ((override_request_q && (override_is_token && OVERRIDABLE[override_token])) && allowed_q[override_token]);

    // the reason reported when a requested override is not obeyed
    assign override_refusal = ((override_is_token && OVERRIDABLE[override_token]) ? REASON_OVERRIDE_REFUSED_FORBIDDEN : REASON_OVERRIDE_REFUSED_NOT_OVERRIDABLE);

    // how many consecutive cycles the proposal has been seen, saturating at CONFIRM_CYCLES
    assign proposal_count = ((candidate_valid && (candidate == proposal_q)) ? ((count >= CONFIRM_CYCLES) ? CONFIRM_CYCLES : (count + 2'd1)) : 2'd1);

    // the proposal is confirmed
    assign confirmed = (proposal_count >= CONFIRM_CYCLES);

    // one step of certfsm.machine.step, tested in its order, the first rule that holds wins (numbers: the rules in certfsm.machine's docstring); a requested override that is not obeyed leaves the table path to decide and reports the refusal as the reason
    always @* begin
        if (!in_envelope_q) begin  // 1. out of envelope: the conservative token, cooldown restarts
            next_current = CONSERVATIVE;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = COOLDOWN_CYCLES;
            next_reason = REASON_FALLBACK_ENVELOPE;
        end else if (!sla_ok_q) begin  // 1. SLA violated: the conservative token, cooldown restarts
            next_current = CONSERVATIVE;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = COOLDOWN_CYCLES;
            next_reason = REASON_FALLBACK_SLA;
        end else if (!current_allowed) begin  // 2. current token forbidden in this cell: pre-empt to the conservative token
            next_current = CONSERVATIVE;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = COOLDOWN_CYCLES;
            next_reason = REASON_LEGALITY_PREEMPT;
        end else if ((override_obeyable && (override_token == current))) begin  // 3. override of the current token: keep it
            next_current = current;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = counted_down;
            next_reason = REASON_OVERRIDE;
        end else if ((override_obeyable && ((override_token == CONSERVATIVE) || cooldown_expired))) begin  // 3. override to the conservative token, or with the cooldown expired: obey
            next_current = override_token;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = COOLDOWN_CYCLES;
            next_reason = REASON_OVERRIDE;
        end else if (override_obeyable) begin  // 3. override waits for the cooldown
            next_current = current;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = counted_down;
            next_reason = REASON_OVERRIDE_WAITING;
        end else if ((proposal_q == current)) begin  // 6. the table proposes the current token: keep it
            next_current = current;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = counted_down;
            next_reason = (override_request_q ? override_refusal : REASON_KEEP_CURRENT);
        end else if ((proposal_q == CONSERVATIVE)) begin  // 4. the table proposes the conservative token: move down at once
            next_current = CONSERVATIVE;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = COOLDOWN_CYCLES;
            next_reason = (override_request_q ? override_refusal : REASON_MOVE_DOWN);
        end else if ((confirmed && cooldown_expired)) begin  // 5. proposal confirmed and cooldown expired: switch
            next_current = proposal_q;
            next_candidate_valid = 1'd0;
            next_candidate = 2'd0;
            next_count = 2'd0;
            next_cooldown = COOLDOWN_CYCLES;
            next_reason = (override_request_q ? override_refusal : REASON_SWITCH);
        end else if (!confirmed) begin  // 5. proposal not yet confirmed: hold and count
            next_current = current;
            next_candidate_valid = 1'd1;
            next_candidate = proposal_q;
            next_count = proposal_count;
            next_cooldown = counted_down;
            next_reason = (override_request_q ? override_refusal : REASON_HOLD_CONFIRMING);
        end else begin  // 5. confirmed, cooldown running: hold
            next_current = current;
            next_candidate_valid = 1'd1;
            next_candidate = proposal_q;
            next_count = proposal_count;
            next_cooldown = counted_down;
            next_reason = (override_request_q ? override_refusal : REASON_HOLD_COOLDOWN);
        end
    end

    // the code of the token emitted this cycle
    always @* begin
        case (next_current)
            2'd0: next_token_code = 4'd0;  // HOLD
            2'd1: next_token_code = 4'd5;  // FAST
            2'd2: next_token_code = 4'd9;  // SLOW
            default: next_token_code = 4'd0;
        endcase
    end

    always @(posedge clk) begin
        if (rst) begin
            token_code <= 4'd0;
            reason_code <= 4'd0;
            cell_index <= 4'd15;
        end else if (valid_q) begin
            token_code <= next_token_code;
            reason_code <= next_reason;
            cell_index <= cell_q;
        end
    end

    always @(posedge clk) begin
        if (rst) begin
            out_valid <= 1'd0;
        end else begin
            out_valid <= valid_q;
        end
    end
endmodule

`default_nettype wire
