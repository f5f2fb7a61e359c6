(* SPDX-License-Identifier: MIT *)
(** The framework types a Sarek backend is written against (SPOC's
    [Spoc_framework.Framework_sig]), restated from its documented shapes
    for {!Hipd_backend}: the same constructors and fields, so that a
    framework's values map one to one. *)

(** 3-D grid and block dimensions. *)
type dims = { x : int; y : int; z : int }

let dims_1d x = { x; y = 1; z = 1 }
let dims_2d x y = { x; y; z = 1 }
let dims_3d x y z = { x; y; z }

(** A device's capabilities, as the hardware (or hipd's CPU device) reports
    them. *)
type capabilities = {
  max_threads_per_block : int;
  max_block_dims : int * int * int;
  max_grid_dims : int * int * int;
  shared_mem_per_block : int;
  total_global_mem : int64;
  compute_capability : int * int;  (** CUDA's; AMD's derived from the gfx target; (0, 0) on the CPU *)
  supports_fp64 : bool;
  supports_atomics : bool;
  warp_size : int;
  max_registers_per_block : int;
  clock_rate_khz : int;
  multiprocessor_count : int;
  is_cpu : bool;
}

(** How a backend runs kernels: hipd's is [JIT]. *)
type execution_model = JIT | Direct | Custom

(** The languages of external kernels. hipd takes CUDA source (and HIP
    source, which the framework has no constructor for). *)
type source_lang = CUDA_Source | OpenCL_Source | PTX | SPIR_V | GLSL_Source

(** Kernel arguments of some backend; each backend adds its constructor. *)
type kargs = ..

type kargs += No_kargs

(** An argument of [run_source]: a buffer binds itself to the backend's
    arguments at its position. *)
type run_source_arg =
  | RSA_Buffer of { binder : kargs -> int -> unit; length : int }
  | RSA_Int32 of int32
  | RSA_Int64 of int64
  | RSA_Float32 of float
  | RSA_Float64 of float

type convergence = Uniform | Divergent | Sync

(** The arguments of [execute_direct] (which a JIT backend refuses); the
    framework's composite and vector forms are packed module values that
    this binding has no use for. *)
type exec_arg =
  | EA_Int32 of int32
  | EA_Int64 of int64
  | EA_Float32 of float
  | EA_Float64 of float

(** A backend's registry of intrinsics. *)
module type INTRINSIC_REGISTRY = sig
  type intrinsic_impl

  val register : string -> intrinsic_impl -> unit
  val find : string -> intrinsic_impl option
  val list_all : unit -> string list
end
