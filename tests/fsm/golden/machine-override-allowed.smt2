; certfsm SMT-LIB 2.6 query: unsat means the property holds, sat that it is violated
; certfsm-version: 0.1.0
; property: override-allowed
; description: with an override present the emitted token is allowed in the cell, and reason OVERRIDE means the emitted token is the requested overridable token
; verdict: proved
; status: unsat
; engine: z3
; machine: n_tokens=5 conservative=0 legal=[0, 1, 2, 3] overridable=[0, 3] confirm_cycles=3 cooldown_cycles=8 codes=[0, 1, 2, 3, 4]
; inputs: 12 table classes
; invariant: registers in their domain, current token legal, since_switch in 0..C, cooldown = 0 implies since_switch = C, cooldown > 0 implies since_switch + cooldown >= C + 1
; rerun: z3 machine-override-allowed.smt2
; rerun: cvc5 machine-override-allowed.smt2
; rerun: certfsm recheck .  (in the folder that holds this file)
(set-info :smt-lib-version 2.6)
(set-logic QF_LIA)
(set-info :status unsat)
; machine: n_tokens=5 conservative=0 legal=[0, 1, 2, 3] overridable=[0, 3] confirm_cycles=3 cooldown_cycles=8 codes=[0, 1, 2, 3, 4]
; state before the step; since = cycles since the last switch to a non-conservative token (saturating at 8)
(declare-const cur Int)
(declare-const cand Int)
(declare-const cnt Int)
(declare-const cd Int)
(declare-const since Int)
; inputs of the cycle: proposal and allowed row of the cell, envelope, SLA, override
(declare-const prop Int)
(declare-const a_0 Bool)
(declare-const a_1 Bool)
(declare-const a_2 Bool)
(declare-const a_3 Bool)
(declare-const a_4 Bool)
(declare-const env Bool)
(declare-const sla Bool)
(declare-const ovr_on Bool)
(declare-const ovr Int)
(define-fun allowed ((t Int)) Bool (or (and (= t 0) a_0) (and (= t 1) a_1) (and (= t 2) a_2) (and (= t 3) a_3) (and (= t 4) a_4)))
(define-fun legal ((t Int)) Bool (or (= t 0) (= t 1) (= t 2) (= t 3)))
(define-fun overridable ((t Int)) Bool (or (= t 0) (= t 3)))
(define-fun code ((t Int)) Int (ite (= t 0) 0 (ite (= t 1) 1 (ite (= t 2) 2 (ite (= t 3) 3 (ite (= t 4) 4 (- 1)))))))
; the state domain and the inductive invariant
(define-fun domain ((cur Int) (cand Int) (cnt Int) (cd Int)) Bool (and (<= 0 cur) (< cur 5) (or (and (= cand (- 1)) (= cnt 0)) (and (<= 0 cand) (< cand 5) (<= 1 cnt) (<= cnt 3))) (<= 0 cd) (<= cd 8)))
(define-fun inv ((cur Int) (cand Int) (cnt Int) (cd Int) (since Int)) Bool (and (domain cur cand cnt cd) (legal cur) (<= 0 since) (<= since 8) (ite (= cd 0) (= since 8) (>= (+ since cd) 9))))
(define-fun initial () Bool (inv 0 (- 1) 0 0 8))
; admissible inputs: the table's 12 (proposal, allowed row) classes
(assert (or (and (= prop 0) a_0 a_1 (not a_2) (not a_3) (not a_4)) (and (= prop 0) a_0 a_1 (not a_2) a_3 (not a_4)) (and (= prop 0) a_0 a_1 a_2 (not a_3) (not a_4)) (and (= prop 0) a_0 a_1 a_2 a_3 (not a_4)) (and (= prop 1) a_0 a_1 (not a_2) (not a_3) (not a_4)) (and (= prop 1) a_0 a_1 (not a_2) a_3 (not a_4)) (and (= prop 1) a_0 a_1 a_2 (not a_3) (not a_4)) (and (= prop 1) a_0 a_1 a_2 a_3 (not a_4)) (and (= prop 2) a_0 a_1 a_2 (not a_3) (not a_4)) (and (= prop 2) a_0 a_1 a_2 a_3 (not a_4)) (and (= prop 3) a_0 a_1 (not a_2) a_3 (not a_4)) (and (= prop 3) a_0 a_1 a_2 a_3 (not a_4))))
; the step (fsm/_machine.py: step), rule by rule; reason codes: 0 KEEP_CURRENT, 1 SWITCH, 2 HOLD_CONFIRMING, 3 HOLD_COOLDOWN, 4 MOVE_DOWN, 5 LEGALITY_PREEMPT, 6 FALLBACK_ENVELOPE, 7 FALLBACK_SLA, 8 OVERRIDE, 9 OVERRIDE_WAITING, 10 OVERRIDE_REFUSED_NOT_OVERRIDABLE, 11 OVERRIDE_REFUSED_FORBIDDEN
(define-fun seen ((t Int)) Bool (allowed t))
(define-fun cdm () Int (ite (> cd 0) (- cd 1) 0))
(define-fun cnt_new () Int (ite (= cand prop) (ite (< cnt 3) (+ cnt 1) 3) 1))
(define-fun ovr_ok () Bool (and ovr_on (overridable ovr) (seen ovr)))
(define-fun table_path () Bool (and env sla (seen cur) (not ovr_ok)))
(define-fun act () Int (ite (not env) 6 (ite (not sla) 7 (ite (not (seen cur)) 5 (ite ovr_ok (ite (or (= ovr cur) (= ovr 0) (= cdm 0)) 8 9) (ite (= prop cur) 0 (ite (= prop 0) 4 (ite (and (>= cnt_new 3) (= cdm 0)) 1 (ite (< cnt_new 3) 2 3)))))))))
(define-fun reason () Int (ite (and table_path ovr_on (not (overridable ovr))) 10 (ite (and table_path ovr_on) 11 act)))
(define-fun n_cur () Int (ite (or (= act 6) (= act 7) (= act 5) (= act 4)) 0 (ite (= act 8) ovr (ite (= act 1) prop cur))))
(define-fun n_cand () Int (ite (or (= act 2) (= act 3)) prop (- 1)))
(define-fun n_cnt () Int (ite (or (= act 2) (= act 3)) cnt_new 0))
(define-fun n_cd () Int (ite (or (or (= act 6) (= act 7) (= act 5) (= act 4)) (= act 1) (and (= act 8) (not (= ovr cur)))) 8 cdm))
(define-fun out () Int n_cur)
(define-fun switched () Bool (and (not (= out cur)) (not (= out 0))))
(define-fun n_since () Int (ite switched 1 (ite (< since 8) (+ since 1) 8)))
; the query, negated: with an override present the emitted token is allowed in the cell, and reason OVERRIDE means the emitted token is the requested overridable token
(assert (inv cur cand cnt cd since))
(assert (not (and (=> (and ovr_on env) (allowed out)) (=> (= reason 8) (and ovr_on (= out ovr) (overridable ovr))))))
(check-sat)
(exit)
