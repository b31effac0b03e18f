; certfsm SMT-LIB 2.6 query: unsat means the property holds, sat that it is violated
; property: tiny_y0_chosen
; description: output 0 can be chosen, or output 1 drops to -3
; verdict: violated
; status: sat
; engine: z3
; network: tiny.onnx
; network-sha256: abababababababababababababababababababababababababababababababab
; query: 1 of 1
; rerun: z3 tiny.smt2
; rerun: cvc5 tiny.smt2
; rerun: certfsm recheck .  (in the folder that holds this file)
; property-text:
;   (assert (>= Y_0 Y_1))
(set-info :smt-lib-version 2.6)
(set-logic QF_LRA)
(set-info :status sat)
; inputs and outputs
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
; layer 0 (Gemm_0): pre-activation Z_0_k, ReLU output H_0_k
(declare-const Z_0_0 Real)
(declare-const Z_0_1 Real)
(declare-const H_0_0 Real)
(declare-const H_0_1 Real)
; input box
(assert (and (<= (- 1.0) X_0) (<= X_0 1.0)))
(assert (and (<= 0.0 X_1) (<= X_1 0.5)))
; layer 0 (Gemm_0): affine and ReLU, 2 x 2
(assert (= Z_0_0 (+ X_0 (* 0.1000000000000000055511151231257827021181583404541015625 X_1))))
(assert (= Z_0_1 (+ (- X_0) 0.25)))
(assert (and (>= H_0_0 0.0) (>= H_0_0 Z_0_0) (or (= H_0_0 0.0) (= H_0_0 Z_0_0))))
(assert (and (>= H_0_1 0.0) (>= H_0_1 Z_0_1) (or (= H_0_1 0.0) (= H_0_1 Z_0_1))))
; layer 1 (Gemm_1): output layer, 2 x 2
(assert (= Y_0 (+ H_0_0 (* (- 2.0) H_0_1))))
(assert (= Y_1 (+ (* 0.5 H_0_0) H_0_1 (- 0.125))))
; unsafe set: some disjunct has every row A @ Y <= b (< b where strict)
(assert (or (<= (+ (- Y_0) Y_1) 0.0) (<= Y_1 (- 3.0))))
(check-sat)
(exit)
