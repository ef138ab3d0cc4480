// The adjoint ops check the dims of every forward operand and cotangent (ChunkGradOps.cpp), and the
// backward's loads and stores use known names.
// RUN: %dgps-opt %s -split-input-file -verify-diagnostics

!bthk = !chunk.tensor<[B, T, H, K], f32>
!bthv = !chunk.tensor<[B, T, HV], f32>
!bthvk = !chunk.tensor<[B, T, HV, K], f32>
!bthvc = !chunk.tensor<[B, T, HV, C], f32>

// A diagonal gate's cotangent must be per channel.
func.func @kkt_grad_gate_cotangent(%k: !bthk, %b: !bthv, %g: !bthvk, %da: !bthvc) {
  // expected-error @+1 {{d_gate has dims [B, T, HV]; expected [B, T, HV, K]}}
  %0:4 = chunk.kkt_grad read %k, write %k gain %b gate %g, d %da : (!bthk, !bthk, !bthv, !bthvk, !bthvc) -> (!bthk, !bthk, !bthv, !bthv)
  return
}

// -----

!bthvc = !chunk.tensor<[B, T, HV, C], f32>
!bthvk = !chunk.tensor<[B, T, HV, K], f32>
func.func @solve_tril_grad_on_keys(%t: !bthvc, %dt: !bthvk) {
  // expected-error @+1 {{d_tril has dims [B, T, HV, K]; expected [B, T, HV, C]}}
  %0 = chunk.solve_tril_grad %t, %dt : (!bthvc, !bthvk) -> !bthvc
  return
}

// -----

!bthvv = !chunk.tensor<[B, T, HV, V], f32>
!nhvkv = !chunk.tensor<[N, HV, K, V], f32>
!bnthvkv = !chunk.tensor<[B, NT, HV, K, V], f32>
!bthk = !chunk.tensor<[B, T, H, K], f32>
!bthvk = !chunk.tensor<[B, T, HV, K], f32>
!bthv = !chunk.tensor<[B, T, HV], f32>
func.func @state_pass_grad_final_per_chunk(%k: !bthk, %vn: !bthvv, %h: !bnthvkv, %dvn: !bthvv) {
  // expected-error @+1 {{d_final has dims [B, NT, HV, K, V]; expected [N, HV, K, V]}}
  %0:5 = chunk.state_pass_grad write %k, vnew %vn, states %h, dvnew %dvn, dstates %h, dfinal %h : (!bthk, !bthvv, !bnthvkv, !bthvv, !bnthvkv, !bnthvkv) -> (!bthvk, !bthvv, !bthk, !bthv, !nhvkv)
  return
}

// -----

!bthk = !chunk.tensor<[B, T, H, K], f32>
!bthv = !chunk.tensor<[B, T, HV], f32>
func.func @add_of_different_dims(%a: !bthk, %b: !bthv) {
  // expected-error @+1 {{term dims [B, T, HV] differ from the result's [B, T, H, K]}}
  %0 = chunk.add %a, %b : !bthk, !bthv -> !bthk
  return
}

// -----

!bthk = !chunk.tensor<[B, T, H, K], f32>
func.func @add_of_one(%a: !bthk) {
  // expected-error @+1 {{sums 1 terms; expected two or more}}
  %0 = chunk.add %a : !bthk -> !bthk
  return
}

// -----

!bthk = !chunk.tensor<[B, T, H, K], f32>
func.func @gradient_of_unknown_input(%a: !bthk) {
  // expected-error @+1 {{stores unknown output 'dkeys'}}
  chunk.store "dkeys", %a : !bthk
  return
}

// -----

func.func @cotangent_of_unknown_output() {
  // expected-error @+1 {{loads unknown input 'dstate'}}
  %0 = chunk.load "dstate" : !chunk.tensor<[N, HV, K, V], f32>
  return
}
