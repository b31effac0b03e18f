(set-info :smt-lib-version 2.6)
(set-logic QF_LRA)
(set-info :status unknown)
; inputs and outputs
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
; layer 0 (Div_0+Gemm_1): pre-activation Z_0_k, ReLU output H_0_k
(declare-const Z_0_0 Real)
(declare-const Z_0_1 Real)
(declare-const H_0_0 Real)
(declare-const H_0_1 Real)
; input box
(assert (and (<= 0.0 X_0) (<= X_0 2.0)))
(assert (and (<= (- 1.0) X_1) (<= X_1 1.0)))
; layer 0 (Div_0+Gemm_1): affine and ReLU, 2 x 2, exact rational weights of a rounded fold
(assert (= Z_0_0 (+ (* (/ 1.0 3.0) X_0) (* 0.4 X_1) (- (/ 1.0 7.0)))))
(assert (= Z_0_1 (+ (* (- 0.1) X_0) X_1 0.5)))
(assert (and (>= H_0_0 0.0) (>= H_0_0 Z_0_0) (or (= H_0_0 0.0) (= H_0_0 Z_0_0))))
(assert (and (>= H_0_1 0.0) (>= H_0_1 Z_0_1) (or (= H_0_1 0.0) (= H_0_1 Z_0_1))))
; layer 1 (Gemm_2): output layer, 1 x 2
(assert (= Y_0 (+ H_0_0 (* (- 0.300000011920928955078125) H_0_1) 0.125)))
; unsafe set: some disjunct has every row A @ Y <= b (< b where strict)
(assert (<= Y_0 (- 0.5)))
(check-sat)
(exit)
