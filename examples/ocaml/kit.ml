(* SPDX-License-Identifier: MIT *)
(* examples/ocaml/kit.ml: what the three examples share: short names for
   building Sarek IR values (what Sarek's PPX produces from a let%kernel),
   and the end of a run. *)

module I = Hipd_ir

let var = I.var
let v x = I.EVar x
let i32 n = I.EConst (I.CInt32 (Int32.of_int n))
let f32 x = I.EConst (I.CFloat32 x)

(* IR operators, used as E.(a + b) where an IR expression is written. *)
module E = struct
  let ( + ) a b = I.EBinop (I.Add, a, b)
  let ( - ) a b = I.EBinop (I.Sub, a, b)
  let ( * ) a b = I.EBinop (I.Mul, a, b)
  let ( / ) a b = I.EBinop (I.Div, a, b)
  let ( < ) a b = I.EBinop (I.Lt, a, b)
  let ( && ) a b = I.EIf (a, b, I.EConst (I.CBool false))
end
let intr name = I.EIntrinsic ([], name, [])
let get a i = I.EArrayRead (a, i)
let set a i e = I.SAssign (I.LArrayElem (a, i), e)
let global_vec name id = I.DParam (var name id (I.TVec I.TFloat32), Some { I.arr_elttype = I.TFloat32; arr_memspace = I.Global })
let scalar name id = I.DParam (var name id I.TInt32, None)
let round32 x = Int32.float_of_bits (Int32.bits_of_float x)

(* Report and exit: 0 when every element matched its reference. *)
let finish name ~bad ~total =
  if bad = 0 then Printf.printf "%s: OK (%d elements match the OCaml reference)\n" name total
  else (
    Printf.printf "%s: FAILED (%d of %d elements differ)\n" name bad total;
    exit 1)
