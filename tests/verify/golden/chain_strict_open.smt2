(set-info :smt-lib-version 2.6)
(set-logic QF_LRA)
(set-info :status unknown)
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
(assert (and (< 0.1 X_0) (<= X_0 0.3)))
(assert (and (<= (- 1.0) X_1) (< X_1 1.0)))
; layer 0 (Gemm_0): affine and ReLU, 2 x 2
(assert (= Z_0_0 (+ X_0 (- X_1))))
(assert (= Z_0_1 (+ (* 0.5 X_0) (* 0.5 X_1) (- 0.100000001490116119384765625))))
(assert (and (>= H_0_0 0.0) (>= H_0_0 Z_0_0) (or (= H_0_0 0.0) (= H_0_0 Z_0_0))))
(assert (and (>= H_0_1 0.0) (>= H_0_1 Z_0_1) (or (= H_0_1 0.0) (= H_0_1 Z_0_1))))
; layer 1 (Gemm_1): output layer, 2 x 2
(assert (= Y_0 H_0_0))
(assert (= Y_1 (+ (- H_0_0) (* 2.0 H_0_1) 0.300000011920928955078125)))
; unsafe set: some disjunct has every row A @ Y <= b (< b where strict)
(assert (or (and (< (+ Y_0 (- Y_1)) 0.0) (<= Y_1 0.1)) (< (- Y_0) (- 0.7))))
(check-sat)
(exit)
