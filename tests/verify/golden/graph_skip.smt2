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
; layer 1 (Gemm_1+Div): pre-activation Z_1_k, ReLU output H_1_k
(declare-const Z_1_0 Real)
(declare-const H_1_0 Real)
; input box
(assert (and (<= (- 1.0) X_0) (<= X_0 1.0)))
(assert (and (<= 0.0 X_1) (<= X_1 2.0)))
; layer 0 (Gemm_0): affine and ReLU, 2 x 2, reads X
(assert (= Z_0_0 (+ X_0 (* (- 0.5) X_1))))
(assert (= Z_0_1 (+ (* 0.25 X_0) X_1 (- 0.125))))
(assert (and (>= H_0_0 0.0) (>= H_0_0 Z_0_0) (or (= H_0_0 0.0) (= H_0_0 Z_0_0))))
(assert (and (>= Z_0_1 0.0) (= H_0_1 Z_0_1)))
; layer 1 (Gemm_1+Div): affine and ReLU, 1 x 4, exact rational weights of a rounded fold, reads X, H_0
(assert (= Z_1_0 (+ (* (/ 1.0 3.0) X_0) H_0_0 (* (- (/ 2.0 3.0)) H_0_1) 0.5)))
(assert (and (<= Z_1_0 0.0) (= H_1_0 0.0)))
; layer 2 (Gemm_2): output layer, 2 x 3, reads H_0, H_1
(assert (= Y_0 (+ H_0_0 (- H_0_1) (* 0.75 H_1_0))))
(assert (= Y_1 (+ (* 0.5 H_0_1) (- H_1_0) 0.1000000000000000055511151231257827021181583404541015625)))
; unsafe set: some disjunct has every row A @ Y <= b (< b where strict)
(assert (< (+ Y_0 (- Y_1)) 0.0))
(check-sat)
(exit)
