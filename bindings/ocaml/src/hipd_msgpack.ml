(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/src/hipd_msgpack.ml: the msgpack values the IR encoder
   writes, and their encoding (the smallest format for each value, as the
   msgpack specification describes them). Writing only: the binding reads
   the daemon's replies through libhipd. *)

type t =
  | Nil
  | Bool of bool
  | Int of int64
  | Float of float  (** always written as float 64 *)
  | Str of string
  | Array of t list
  | Map of (string * t) list

let int n = Int (Int64.of_int n)

let add_uint_be b n bytes =
  for i = bytes - 1 downto 0 do
    Buffer.add_char b
      (Char.unsafe_chr (Int64.to_int (Int64.logand (Int64.shift_right_logical n (8 * i)) 0xffL)))
  done

let add_int b n =
  let open Int64 in
  if compare n 0L >= 0 then
    if compare n 128L < 0 then Buffer.add_char b (Char.chr (to_int n))
    else if compare n 256L < 0 then (Buffer.add_char b '\xcc'; add_uint_be b n 1)
    else if compare n 65536L < 0 then (Buffer.add_char b '\xcd'; add_uint_be b n 2)
    else if compare n 0x1_0000_0000L < 0 then (Buffer.add_char b '\xce'; add_uint_be b n 4)
    else (Buffer.add_char b '\xcf'; add_uint_be b n 8)
  else if compare n (-32L) >= 0 then Buffer.add_char b (Char.chr (to_int n land 0xff))
  else if compare n (-128L) >= 0 then (Buffer.add_char b '\xd0'; add_uint_be b n 1)
  else if compare n (-32768L) >= 0 then (Buffer.add_char b '\xd1'; add_uint_be b n 2)
  else if compare n (-0x8000_0000L) >= 0 then (Buffer.add_char b '\xd2'; add_uint_be b n 4)
  else (Buffer.add_char b '\xd3'; add_uint_be b n 8)

(* A length-prefixed header: the fix form below [fix_max], then 8 (when
   [b8] is given), 16 and 32 bits. *)
let add_header b n ~fix ~fix_max ?b8 ~b16 ~b32 () =
  if n < fix_max then Buffer.add_char b (Char.chr (fix lor n))
  else
    match b8 with
    | Some c when n < 256 -> Buffer.add_char b c; add_uint_be b (Int64.of_int n) 1
    | _ ->
        if n < 65536 then (Buffer.add_char b b16; add_uint_be b (Int64.of_int n) 2)
        else (Buffer.add_char b b32; add_uint_be b (Int64.of_int n) 4)

let rec add b = function
  | Nil -> Buffer.add_char b '\xc0'
  | Bool false -> Buffer.add_char b '\xc2'
  | Bool true -> Buffer.add_char b '\xc3'
  | Int n -> add_int b n
  | Float f -> Buffer.add_char b '\xcb'; add_uint_be b (Int64.bits_of_float f) 8
  | Str s ->
      add_header b (String.length s) ~fix:0xa0 ~fix_max:32 ~b8:'\xd9' ~b16:'\xda' ~b32:'\xdb' ();
      Buffer.add_string b s
  | Array l ->
      add_header b (List.length l) ~fix:0x90 ~fix_max:16 ~b16:'\xdc' ~b32:'\xdd' ();
      List.iter (add b) l
  | Map kvs ->
      add_header b (List.length kvs) ~fix:0x80 ~fix_max:16 ~b16:'\xde' ~b32:'\xdf' ();
      List.iter (fun (k, v) -> add b (Str k); add b v) kvs

let to_string v =
  let b = Buffer.create 256 in
  add b v;
  Buffer.contents b
