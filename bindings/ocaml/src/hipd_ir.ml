(* SPDX-License-Identifier: MIT *)
(** Sarek's kernel IR as OCaml values, shaped as SPOC's [Sarek_ir_types]
    (the same constructors and record fields, so that a value a Sarek
    program holds converts field for field), and its encoding to hipd's
    IR ([proto/IR.md], versions 1 and 2): {!encode} gives the msgpack bytes
    that [Hipd.generate_source] and [Hipd.kernel_compile_ir] take.

    Where the two differ, the encoder applies IR.md's "differences from the
    SPOC types": record and variant definitions are collected into the
    kernel's tables, variable uses become [["var", id, name]], a helper call
    names the helper, helper parameters take the ids their uses carry,
    pattern binders take theirs from the case body, a variable pattern in a
    statement match becomes a wildcard and a [let] of the scrutinee, and a
    native block is evaluated for the frameworks hipd reads. What cannot
    cross a process (the OCaml fallback of a native block, a kernel's
    native function) is not encoded. *)

type memspace = Global | Shared | Local

type elttype =
  | TInt32
  | TInt64
  | TFloat32
  | TFloat64
  | TBool
  | TUnit
  | TRecord of string * (string * elttype) list
  | TVariant of string * (string * elttype list) list
  | TArray of elttype * memspace
  | TVec of elttype
  | TFloat16  (** IR version 2: a storage type (compute in f32, cast) *)
  | TUint8  (** IR version 2 *)

type var = {
  var_name : string;
  var_id : int;
  var_type : elttype;
  var_mutable : bool;
}

type const =
  | CInt32 of int32
  | CInt64 of int64
  | CFloat32 of float
  | CFloat64 of float
  | CBool of bool
  | CUnit

type binop =
  | Add | Sub | Mul | Div | Mod
  | Eq | Ne | Lt | Le | Gt | Ge
  | And | Or | Shl | Shr | BitAnd | BitOr | BitXor

type unop = Neg | Not | BitNot
type for_dir = Upto | Downto

type pattern =
  | PConstr of string * string list
      (** constructor, bound names (["_"]: ignored); [""] with one name is a
          variable pattern *)
  | PWild

type expr =
  | EConst of const
  | EVar of var
  | EBinop of binop * expr * expr
  | EUnop of unop * expr
  | EArrayRead of string * expr
  | EArrayReadExpr of expr * expr
  | ERecordField of expr * string
  | EIntrinsic of string list * string * expr list
  | ECast of elttype * expr
  | ETuple of expr list
  | EApp of expr * expr list  (** the function is [EVar] of a helper *)
  | ERecord of string * (string * expr) list
  | EVariant of string * string * expr list
  | EArrayLen of string
  | EArrayCreate of elttype * expr * memspace
  | EIf of expr * expr * expr
  | EMatch of expr * (pattern * expr) list

type lvalue =
  | LVar of var
  | LArrayElem of string * expr
  | LArrayElemExpr of expr * expr
  | LRecordField of lvalue * string

(** The arguments the OCaml fallback of a native block receives (never
    encoded: closures do not cross a process). *)
type native_arg =
  | NA_Int32 of int32
  | NA_Int64 of int64
  | NA_Float32 of float
  | NA_Float64 of float

type ocaml_closure = {
  run : block:int * int * int -> grid:int * int * int -> native_arg array -> unit;
}

type stmt =
  | SAssign of lvalue * expr
  | SSeq of stmt list
  | SIf of expr * stmt * stmt option
  | SWhile of expr * stmt
  | SFor of var * expr * expr * for_dir * stmt
  | SMatch of expr * (pattern * stmt) list
  | SReturn of expr
  | SBarrier
  | SWarpBarrier
  | SExpr of expr
  | SEmpty
  | SLet of var * expr * stmt
  | SLetMut of var * expr * stmt
  | SPragma of string list * stmt
  | SMemFence
  | SBlock of stmt
  | SNative of { gpu : framework:string -> string; ocaml : ocaml_closure }

and decl =
  | DParam of var * array_info option
  | DLocal of var * expr option
  | DShared of string * elttype * expr option

and array_info = { arr_elttype : elttype; arr_memspace : memspace }

and helper_func = {
  hf_name : string;
  hf_params : var list;
  hf_ret_type : elttype;
  hf_body : stmt;
}

type native_fn_t =
  | NativeFn of
      (parallel:bool -> block:int * int * int -> grid:int * int * int ->
       native_arg array -> unit)

type kernel = {
  kern_name : string;
  kern_params : decl list;
  kern_locals : decl list;
  kern_body : stmt;
  kern_types : (string * (string * elttype) list) list;
  kern_variants : (string * (string * elttype list) list) list;
  kern_funcs : helper_func list;
  kern_native_fn : native_fn_t option;
}

(** {1 Building} *)

let var ?(mutable_ = false) name id ty =
  { var_name = name; var_id = id; var_type = ty; var_mutable = mutable_ }

let kernel ?(locals = []) ?(types = []) ?(variants = []) ?(funcs = []) name params body =
  {
    kern_name = name;
    kern_params = params;
    kern_locals = locals;
    kern_body = body;
    kern_types = types;
    kern_variants = variants;
    kern_funcs = funcs;
    kern_native_fn = None;
  }

(** {1 Encoding} *)

(** A value the encoding cannot represent (a tuple pattern, two different
    definitions of one record type, an [EApp] of something other than a
    helper's name...). *)
exception Encode_error of string

let fail fmt = Printf.ksprintf (fun s -> raise (Encode_error s)) fmt

(** The frameworks whose code a native block is asked for: hipd's
    generator reads ["hip"] only; ["cuda"] goes along for tools. *)
let native_frameworks = [ "hip"; "cuda" ]

module M = Hipd_msgpack

let str s = M.Str s
let node tag fields = M.Array (str tag :: fields)
let opt f = function None -> M.Nil | Some x -> f x

let memspace = function Global -> str "global" | Shared -> str "shared" | Local -> str "local"

(* The type tables, collected while encoding: definitions in the kernel's
   own tables first, then those found inline in types. *)
type tables = {
  mutable records : (string * (string * elttype) list) list;  (* reversed *)
  mutable variants : (string * (string * elttype list) list) list;
  mutable version : int;  (* 2 once a version 2 feature is used *)
}

let rec add_record t name fields =
  match List.assoc_opt name t.records with
  | Some f when f = fields -> ()
  | Some _ -> fail "record type %s has two different definitions" name
  | None ->
      t.records <- (name, fields) :: t.records;
      List.iter (fun (_, ty) -> collect t ty) fields

and add_variant t name ctors =
  match List.assoc_opt name t.variants with
  | Some c when c = ctors -> ()
  | Some _ -> fail "variant type %s has two different definitions" name
  | None ->
      t.variants <- (name, ctors) :: t.variants;
      List.iter (fun (_, tys) -> List.iter (collect t) tys) ctors

and collect t = function
  | TRecord (n, fields) -> if fields <> [] then add_record t n fields
  | TVariant (n, ctors) -> if ctors <> [] then add_variant t n ctors
  | TArray (ty, _) | TVec ty -> collect t ty
  | TFloat16 | TUint8 -> t.version <- 2
  | TInt32 | TInt64 | TFloat32 | TFloat64 | TBool | TUnit -> ()

let rec elttype t ty =
  collect t ty;
  match ty with
  | TInt32 -> node "i32" []
  | TInt64 -> node "i64" []
  | TFloat32 -> node "f32" []
  | TFloat64 -> node "f64" []
  | TBool -> node "bool" []
  | TUnit -> node "unit" []
  | TFloat16 -> node "f16" []
  | TUint8 -> node "u8" []
  | TRecord (n, _) -> node "record" [ str n ]
  | TVariant (n, _) -> node "variant" [ str n ]
  | TArray (e, m) -> node "array" [ elttype t e; memspace m ]
  | TVec e -> node "vec" [ elttype t e ]

let var_decl ?(force_mutable = false) t v =
  M.Map
    ([ ("name", str v.var_name); ("id", M.int v.var_id); ("type", elttype t v.var_type) ]
    @ if v.var_mutable || force_mutable then [ ("mutable", M.Bool true) ] else [])

let var_use v = node "var" [ M.int v.var_id; str v.var_name ]

let const = function
  | CInt32 n -> node "i32" [ M.Int (Int64.of_int32 n) ]
  | CInt64 n -> node "i64" [ M.Int n ]
  | CFloat32 f -> node "f32" [ M.Float f ]
  | CFloat64 f -> node "f64" [ M.Float f ]
  | CBool b -> node "bool" [ M.Bool b ]
  | CUnit -> node "unit" []

let binop = function
  | Add -> "add" | Sub -> "sub" | Mul -> "mul" | Div -> "div" | Mod -> "mod"
  | Eq -> "eq" | Ne -> "ne" | Lt -> "lt" | Le -> "le" | Gt -> "gt" | Ge -> "ge"
  | And -> "and" | Or -> "or" | Shl -> "shl" | Shr -> "shr"
  | BitAnd -> "band" | BitOr -> "bor" | BitXor -> "bxor"

let unop = function Neg -> "neg" | Not -> "not" | BitNot -> "bnot"

(* The first use of a variable named [name] in an expression or statement:
   the var it carries (its id and type). *)
let rec find_expr name e =
  let ( <|> ) a b = match a with Some _ -> a | None -> Lazy.force b in
  let list l = List.fold_left (fun acc e -> acc <|> lazy (find_expr name e)) None l in
  match e with
  | EVar v when v.var_name = name -> Some v
  | EVar _ | EConst _ | EArrayLen _ -> None
  | EBinop (_, a, b) | EArrayReadExpr (a, b) -> list [ a; b ]
  | EUnop (_, a) | ERecordField (a, _) | ECast (_, a) | EArrayRead (_, a) -> find_expr name a
  | EIntrinsic (_, _, l) | ETuple l | EVariant (_, _, l) -> list l
  | EApp (_, l) -> list l
  | ERecord (_, fs) -> list (List.map snd fs)
  | EArrayCreate (_, a, _) -> find_expr name a
  | EIf (a, b, c) -> list [ a; b; c ]
  | EMatch (s, cases) -> find_expr name s <|> lazy (list (List.map snd cases))

let rec find_lvalue name = function
  | LVar v when v.var_name = name -> Some v
  | LVar _ -> None
  | LArrayElem (_, i) -> find_expr name i
  | LArrayElemExpr (a, b) -> (
      match find_expr name a with Some v -> Some v | None -> find_expr name b)
  | LRecordField (l, _) -> find_lvalue name l

let rec find_stmt name s =
  let ( <|> ) a b = match a with Some _ -> a | None -> Lazy.force b in
  let fe = find_expr name and fs = find_stmt name in
  let stmts l = List.fold_left (fun acc s -> acc <|> lazy (fs s)) None l in
  match s with
  | SAssign (l, e) -> find_lvalue name l <|> lazy (fe e)
  | SSeq l -> stmts l
  | SIf (c, a, b) -> fe c <|> lazy (fs a) <|> lazy (match b with Some b -> fs b | None -> None)
  | SWhile (c, b) -> fe c <|> lazy (fs b)
  | SFor (_, a, b, _, body) -> fe a <|> lazy (fe b) <|> lazy (fs body)
  | SMatch (e, cases) -> fe e <|> lazy (stmts (List.map snd cases))
  | SReturn e | SExpr e -> fe e
  | SLet (_, e, b) | SLetMut (_, e, b) -> fe e <|> lazy (fs b)
  | SPragma (_, b) | SBlock b -> fs b
  | SBarrier | SWarpBarrier | SEmpty | SMemFence | SNative _ -> None

(* Binders of a constructor pattern: each bound name with the id its uses
   in the case body carry ([find] searches the body); nil for "_" and for a
   name never used. *)
let binders find names =
  M.Array
    (List.map
       (fun n ->
         if n = "_" then M.Nil
         else
           match find n with
           | Some v -> M.Map [ ("name", str n); ("id", M.int v.var_id) ]
           | None -> M.Nil)
       names)

let pattern find = function
  | PWild -> node "wild" []
  | PConstr ("tuple", _) -> fail "tuple patterns have no encoding (IR.md: differences)"
  | PConstr ("", _) -> fail "a variable pattern is only encoded in a statement match"
  | PConstr (c, names) -> node "ctor" [ str c; binders find names ]

let rec expr t e =
  let ex = expr t in
  match e with
  | EConst c -> node "const" [ const c ]
  | EVar v -> var_use v
  | EBinop (op, a, b) -> node "binop" [ str (binop op); ex a; ex b ]
  | EUnop (op, a) -> node "unop" [ str (unop op); ex a ]
  | EArrayRead (a, i) -> node "aread" [ str a; ex i ]
  | EArrayReadExpr (a, i) -> node "areadx" [ ex a; ex i ]
  | ERecordField (r, f) -> node "field" [ ex r; str f ]
  | EIntrinsic (path, name, args) ->
      node "intrinsic" [ M.Array (List.map str path); str name; M.Array (List.map ex args) ]
  | ECast (ty, a) -> node "cast" [ elttype t ty; ex a ]
  | ETuple l -> node "tuple" [ M.Array (List.map ex l) ]
  | EApp (EVar f, args) -> node "app" [ str f.var_name; M.Array (List.map ex args) ]
  | EApp (_, _) -> fail "EApp: the function must be a helper's name (EVar)"
  | ERecord (ty, fs) ->
      node "record" [ str ty; M.Array (List.map (fun (f, v) -> M.Array [ str f; ex v ]) fs) ]
  | EVariant (ty, c, args) -> node "variant" [ str ty; str c; M.Array (List.map ex args) ]
  | EArrayLen a -> node "alen" [ str a ]
  | EArrayCreate (ty, n, m) -> node "acreate" [ elttype t ty; ex n; memspace m ]
  | EIf (c, a, b) -> node "if" [ ex c; ex a; ex b ]
  | EMatch (s, cases) ->
      node "match"
        [ ex s;
          M.Array
            (List.map
               (fun (p, body) -> M.Array [ pattern (fun n -> find_expr n body) p; ex body ])
               cases) ]

let rec lvalue t = function
  | LVar v -> var_use v
  | LArrayElem (a, i) -> node "aelem" [ str a; expr t i ]
  | LArrayElemExpr (a, i) -> node "aelemx" [ expr t a; expr t i ]
  | LRecordField (l, f) -> node "field" [ lvalue t l; str f ]

let dir = function Upto -> str "upto" | Downto -> str "downto"

let rec stmt t s =
  let st = stmt t and ex = expr t in
  match s with
  | SAssign (l, e) -> node "assign" [ lvalue t l; ex e ]
  | SSeq l -> node "seq" [ M.Array (List.map st l) ]
  | SIf (c, a, b) -> node "if" [ ex c; st a; opt st b ]
  | SWhile (c, b) -> node "while" [ ex c; st b ]
  | SFor (v, a, b, d, body) -> node "for" [ var_decl t v; ex a; ex b; dir d; st body ]
  | SMatch (scrut, cases) ->
      let case (p, body) =
        match p with
        | PConstr ("", [ x ]) -> (
            (* A variable pattern: a wildcard whose body binds the
               scrutinee (IR.md, differences from the SPOC types). *)
            match find_stmt x body with
            | Some v ->
                M.Array [ node "wild" []; node "let" [ var_decl t { v with var_mutable = false }; ex scrut; st body ] ]
            | None -> M.Array [ node "wild" []; st body ])
        | _ -> M.Array [ pattern (fun n -> find_stmt n body) p; st body ]
      in
      node "match" [ ex scrut; M.Array (List.map case cases) ]
  | SReturn e -> node "return" [ ex e ]
  | SBarrier -> node "barrier" []
  | SWarpBarrier -> node "warp_barrier" []
  | SExpr e -> node "expr" [ ex e ]
  | SEmpty -> node "empty" []
  | SLet (v, e, b) -> node "let" [ var_decl t v; ex e; st b ]
  | SLetMut (v, e, b) -> node "letmut" [ var_decl ~force_mutable:true t v; ex e; st b ]
  | SPragma (hints, b) -> node "pragma" [ M.Array (List.map str hints); st b ]
  | SMemFence -> node "fence" []
  | SBlock b -> node "block" [ st b ]
  | SNative { gpu; _ } ->
      let code =
        List.filter_map
          (fun fw -> match gpu ~framework:fw with c -> Some (fw, str c) | exception _ -> None)
          native_frameworks
      in
      if code = [] then fail "native block: no code for any of %s" (String.concat ", " native_frameworks);
      node "native" [ M.Map code ]

let decl t = function
  | DParam (v, ai) ->
      node "param"
        [ var_decl t v;
          opt (fun a -> M.Map [ ("elt", elttype t a.arr_elttype); ("mem", memspace a.arr_memspace) ]) ai ]
  | DLocal (v, init) -> node "local" [ var_decl t v; opt (expr t) init ]
  | DShared (n, ty, size) -> node "shared" [ str n; elttype t ty; opt (expr t) size ]

(* A helper's params take the ids their uses in the body carry (SPOC
   numbers them 0..n-1 while the body uses the typer's ids); a param never
   used keeps its own id unless a use took it, then gets a fresh one. *)
let helper t h =
  let used = List.map (fun p -> find_stmt p.var_name h.hf_body) h.hf_params in
  let taken = List.filter_map (Option.map (fun v -> v.var_id)) used in
  let fresh = ref (List.fold_left max 0 (taken @ List.map (fun p -> p.var_id) h.hf_params)) in
  let params =
    List.map2
      (fun p u ->
        match u with
        | Some v -> { p with var_id = v.var_id }
        | None when List.mem p.var_id taken -> incr fresh; { p with var_id = !fresh }
        | None -> p)
      h.hf_params used
  in
  M.Map
    [ ("name", str h.hf_name);
      ("params", M.Array (List.map (var_decl t) params));
      ("ret", elttype t h.hf_ret_type);
      ("body", stmt t h.hf_body) ]

(** The IR document of a kernel, as a msgpack value. [version]: the IR
    version to write (default: 1, or 2 when the kernel uses [TFloat16] or
    [TUint8]); asking for 1 for a kernel that needs 2 is an error. *)
let document ?version k =
  let t = { records = []; variants = []; version = 1 } in
  List.iter (fun (n, f) -> add_record t n f) k.kern_types;
  List.iter (fun (n, c) -> add_variant t n c) k.kern_variants;
  let params = List.map (decl t) k.kern_params in
  let locals = List.map (decl t) k.kern_locals in
  let body = stmt t k.kern_body in
  let helpers = List.map (helper t) k.kern_funcs in
  (* Field and payload types may name types first met there. *)
  let records =
    List.rev_map
      (fun (n, fs) -> M.Map [ ("name", str n); ("fields", M.Array (List.map (fun (f, ty) -> M.Array [ str f; elttype t ty ]) fs)) ])
      t.records
  in
  let variants =
    List.rev_map
      (fun (n, cs) ->
        M.Map
          [ ("name", str n);
            ("ctors", M.Array (List.map (fun (c, tys) -> M.Array [ str c; M.Array (List.map (elttype t) tys) ]) cs)) ])
      t.variants
  in
  let v =
    match version with
    | None -> t.version
    | Some v when v < t.version -> fail "the kernel needs IR version %d (f16 or u8 types)" t.version
    | Some v -> v
  in
  M.Map
    [ ("ir", M.int v);
      ( "kernel",
        M.Map
          [ ("name", str k.kern_name);
            ("params", M.Array params);
            ("locals", M.Array locals);
            ("body", body);
            ("records", M.Array records);
            ("variants", M.Array variants);
            ("helpers", M.Array helpers) ] ) ]

(** The msgpack bytes of the kernel's IR document. *)
let encode ?version k = M.to_string (document ?version k)
