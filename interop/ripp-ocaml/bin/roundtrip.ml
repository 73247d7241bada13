(* `ripp_peer roundtrip FILE.json`: checks the project's vectors
   (vectors/ripp/*.json, form in vectors/ripp/README.md) against the real
   bin_prot library. For every vector with bytes: bin_prot decodes them
   (completely), the decoded value is compared with the vector's JSON value,
   bin_prot re-encodes it and the bytes are compared; and bin_prot encodes
   the vector's JSON value independently of the decode. Invalid vectors must
   be refused by the layer the vector names. One line per vector
   ("ok FILE ID" or "FAIL FILE ID: ..." with the differing bytes), then
   "N passed, N failed"; exit 1 on any failure. *)

open Bin_prot.Std
module J = Yojson.Basic
module TC = Bin_prot.Type_class

exception Bad_json of string

let bad fmt = Printf.ksprintf (fun s -> raise (Bad_json s)) fmt

(* A bin_prot type with its JSON value form (README "The JSON value form"). *)
type codec =
  | C : {
      reader : 'a TC.reader;
      writer : 'a TC.writer;
      to_j : 'a -> J.t;
      of_j : J.t -> 'a;
    }
      -> codec

(* --- JSON value form ---------------------------------------------------- *)

let j_str = function `String s -> s | j -> bad "expected a JSON string, got %s" (J.to_string j)
let j_list = function `List l -> l | j -> bad "expected a JSON array, got %s" (J.to_string j)

let j_field name = function
  | `Assoc kv -> ( match List.assoc_opt name kv with Some v -> v | None -> bad "missing key %s" name)
  | j -> bad "expected an object with %s, got %s" name (J.to_string j)

let int_to_j i = `String (string_of_int i)

let int_of_j j =
  let s = j_str j in
  match int_of_string_opt s with Some i -> i | None -> bad "int %s out of OCaml's int range" s

let int64_to_j i = `String (Int64.to_string i)
let int64_of_j j = match Int64.of_string_opt (j_str j) with Some i -> i | None -> bad "bad int64 %s" (j_str j)
let str_to_j s = `String (Codec.hex s)
let str_of_j j = try Codec.unhex (j_str j) with _ -> bad "bad hex %s" (j_str j)
let float_to_j f = `String (Printf.sprintf "0x%016Lx" (Int64.bits_of_float f))
let float_of_j j = Int64.float_of_bits (int64_of_j j)
let bool_to_j b = `Bool b
let bool_of_j = function `Bool b -> b | j -> bad "expected a bool, got %s" (J.to_string j)
let opt_to_j f = function None -> `Null | Some v -> `List [ f v ]
let opt_of_j f = function `Null -> None | `List [ v ] -> Some (f v) | j -> bad "bad option %s" (J.to_string j)
let list_to_j f l = `List (List.map f l)
let list_of_j f j = List.map f (j_list j)
let pair_to_j f g (a, b) = `List [ f a; g b ]
let pair_of_j f g = function `List [ a; b ] -> (f a, g b) | j -> bad "bad pair %s" (J.to_string j)

let variant_of_j = function
  | `List (`String name :: args) -> (name, args)
  | j -> bad "bad variant %s" (J.to_string j)

(* --- profile types ------------------------------------------------------- *)

module T = Types

let rec ft_to_j : T.Schema.field_type -> J.t = function
  | T.Schema.Int -> `List [ `String "Int" ]
  | Int64 -> `List [ `String "Int64" ]
  | Float -> `List [ `String "Float" ]
  | Bool -> `List [ `String "Bool" ]
  | String -> `List [ `String "String" ]
  | Option t -> `List [ `String "Option"; ft_to_j t ]
  | List t -> `List [ `String "List"; ft_to_j t ]

let rec ft_of_j j : T.Schema.field_type =
  match variant_of_j j with
  | "Int", [] -> Int
  | "Int64", [] -> Int64
  | "Float", [] -> Float
  | "Bool", [] -> Bool
  | "String", [] -> String
  | "Option", [ t ] -> Option (ft_of_j t)
  | "List", [ t ] -> List (ft_of_j t)
  | _ -> bad "bad Schema.field_type %s" (J.to_string j)

let field_to_j (f : T.Schema.field) =
  `Assoc
    [ ("field_name", str_to_j f.field_name); ("field_type", ft_to_j f.field_type); ("default", opt_to_j str_to_j f.default) ]

let field_of_j j : T.Schema.field =
  {
    field_name = str_of_j (j_field "field_name" j);
    field_type = ft_of_j (j_field "field_type" j);
    default = opt_of_j str_of_j (j_field "default" j);
  }

let schema_to_j (s : T.Schema.t) =
  `Assoc
    [ ("schema_name", str_to_j s.schema_name); ("version", int_to_j s.version); ("fields", list_to_j field_to_j s.fields) ]

let schema_of_j j : T.Schema.t =
  {
    schema_name = str_of_j (j_field "schema_name" j);
    version = int_of_j (j_field "version" j);
    fields = list_of_j field_of_j (j_field "fields" j);
  }

let fv_to_j (f : T.Delta.field_value) = `Assoc [ ("field", str_to_j f.field); ("value", str_to_j f.value) ]
let fv_of_j j : T.Delta.field_value = { field = str_of_j (j_field "field" j); value = str_of_j (j_field "value" j) }

let delta_to_j : T.Delta.t -> J.t = function
  | Set fs -> `List [ `String "Set"; list_to_j fv_to_j fs ]
  | Patch fs -> `List [ `String "Patch"; list_to_j fv_to_j fs ]
  | Remove -> `List [ `String "Remove" ]

let delta_of_j j : T.Delta.t =
  match variant_of_j j with
  | "Set", [ fs ] -> Set (list_of_j fv_of_j fs)
  | "Patch", [ fs ] -> Patch (list_of_j fv_of_j fs)
  | "Remove", [] -> Remove
  | _ -> bad "bad Delta.t %s" (J.to_string j)

let handshake_to_j (h : T.Handshake.t) =
  `Assoc
    [
      ("source_worker_id", str_to_j h.source_worker_id);
      ("output_schemas", list_to_j (pair_to_j str_to_j schema_to_j) h.output_schemas);
      ("protocol_version", int_to_j h.protocol_version);
    ]

let handshake_of_j j : T.Handshake.t =
  {
    source_worker_id = str_of_j (j_field "source_worker_id" j);
    output_schemas = list_of_j (pair_of_j str_of_j schema_of_j) (j_field "output_schemas" j);
    protocol_version = int_of_j (j_field "protocol_version" j);
  }

let delta_msg_to_j (d : T.Delta_msg.t) =
  `Assoc
    [
      ("source_output", str_to_j d.source_output);
      ("key", str_to_j d.key);
      ("delta_bytes", str_to_j d.delta_bytes);
      ("sequence_no", int_to_j d.sequence_no);
      ("watermark_ns", opt_to_j int64_to_j d.watermark_ns);
    ]

let delta_msg_of_j j : T.Delta_msg.t =
  {
    source_output = str_of_j (j_field "source_output" j);
    key = str_of_j (j_field "key" j);
    delta_bytes = str_of_j (j_field "delta_bytes" j);
    sequence_no = int_of_j (j_field "sequence_no" j);
    watermark_ns = opt_of_j int64_of_j (j_field "watermark_ns" j);
  }

let creq_to_j (r : T.Checkpoint_request.t) = `Assoc [ ("checkpoint_id", int_to_j r.checkpoint_id) ]
let creq_of_j j : T.Checkpoint_request.t = { checkpoint_id = int_of_j (j_field "checkpoint_id" j) }

let ss_to_j (s : T.Checkpoint_ack.source_state) =
  `Assoc
    [
      ("source_output", str_to_j s.source_output);
      ("last_sequence_no", int_to_j s.last_sequence_no);
      ("applied_count", int_to_j s.applied_count);
      ("state_digest", str_to_j s.state_digest);
    ]

let ss_of_j j : T.Checkpoint_ack.source_state =
  {
    source_output = str_of_j (j_field "source_output" j);
    last_sequence_no = int_of_j (j_field "last_sequence_no" j);
    applied_count = int_of_j (j_field "applied_count" j);
    state_digest = str_of_j (j_field "state_digest" j);
  }

let ack_to_j (a : T.Checkpoint_ack.t) =
  `Assoc
    [ ("checkpoint_id", int_to_j a.checkpoint_id); ("worker_id", str_to_j a.worker_id); ("sources", list_to_j ss_to_j a.sources) ]

let ack_of_j j : T.Checkpoint_ack.t =
  {
    checkpoint_id = int_of_j (j_field "checkpoint_id" j);
    worker_id = str_of_j (j_field "worker_id" j);
    sources = list_of_j ss_of_j (j_field "sources" j);
  }

let hb_to_j (h : T.Heartbeat.t) =
  `Assoc [ ("worker_id", str_to_j h.worker_id); ("timestamp_ns", int64_to_j h.timestamp_ns); ("load", float_to_j h.load) ]

let hb_of_j j : T.Heartbeat.t =
  {
    worker_id = str_of_j (j_field "worker_id" j);
    timestamp_ns = int64_of_j (j_field "timestamp_ns" j);
    load = float_of_j (j_field "load" j);
  }

let neg_to_j (n : T.Schema_negotiation.t) =
  `Assoc
    [
      ("ok", bool_to_j n.ok);
      ("errors", list_to_j str_to_j n.errors);
      ("protocol_version", int_to_j n.protocol_version);
      ("heartbeat_interval_ms", int_to_j n.heartbeat_interval_ms);
      ("worker_id", str_to_j n.worker_id);
    ]

let neg_of_j j : T.Schema_negotiation.t =
  {
    ok = bool_of_j (j_field "ok" j);
    errors = list_of_j str_of_j (j_field "errors" j);
    protocol_version = int_of_j (j_field "protocol_version" j);
    heartbeat_interval_ms = int_of_j (j_field "heartbeat_interval_ms" j);
    worker_id = str_of_j (j_field "worker_id" j);
  }

(* --- type names -> codecs ----------------------------------------------- *)

let named =
  [
    ( "nat0",
      C
        {
          reader = TC.bin_reader_nat0;
          writer = TC.bin_writer_nat0;
          to_j = (fun n -> int_to_j (n : Bin_prot.Nat0.t :> int));
          of_j = (fun j -> Bin_prot.Nat0.of_int (int_of_j j));
        } );
    ("int", C { reader = bin_reader_int; writer = bin_writer_int; to_j = int_to_j; of_j = int_of_j });
    ("int64", C { reader = bin_reader_int64; writer = bin_writer_int64; to_j = int64_to_j; of_j = int64_of_j });
    ("string", C { reader = bin_reader_string; writer = bin_writer_string; to_j = str_to_j; of_j = str_of_j });
    ("float", C { reader = bin_reader_float; writer = bin_writer_float; to_j = float_to_j; of_j = float_of_j });
    ("bool", C { reader = bin_reader_bool; writer = bin_writer_bool; to_j = bool_to_j; of_j = bool_of_j });
    ( "Schema.field_type",
      C { reader = T.Schema.bin_reader_field_type; writer = T.Schema.bin_writer_field_type; to_j = ft_to_j; of_j = ft_of_j } );
    ("Schema.field", C { reader = T.Schema.bin_reader_field; writer = T.Schema.bin_writer_field; to_j = field_to_j; of_j = field_of_j });
    ("Schema.t", C { reader = T.Schema.bin_reader_t; writer = T.Schema.bin_writer_t; to_j = schema_to_j; of_j = schema_of_j });
    ( "Delta.field_value",
      C { reader = T.Delta.bin_reader_field_value; writer = T.Delta.bin_writer_field_value; to_j = fv_to_j; of_j = fv_of_j } );
    ("Delta.t", C { reader = T.Delta.bin_reader_t; writer = T.Delta.bin_writer_t; to_j = delta_to_j; of_j = delta_of_j });
    ( "Handshake.t",
      C { reader = T.Handshake.bin_reader_t; writer = T.Handshake.bin_writer_t; to_j = handshake_to_j; of_j = handshake_of_j } );
    ( "Delta_msg.t",
      C { reader = T.Delta_msg.bin_reader_t; writer = T.Delta_msg.bin_writer_t; to_j = delta_msg_to_j; of_j = delta_msg_of_j } );
    ( "Checkpoint_request.t",
      C { reader = T.Checkpoint_request.bin_reader_t; writer = T.Checkpoint_request.bin_writer_t; to_j = creq_to_j; of_j = creq_of_j } );
    ( "Checkpoint_ack.source_state",
      C
        {
          reader = T.Checkpoint_ack.bin_reader_source_state;
          writer = T.Checkpoint_ack.bin_writer_source_state;
          to_j = ss_to_j;
          of_j = ss_of_j;
        } );
    ( "Checkpoint_ack.t",
      C { reader = T.Checkpoint_ack.bin_reader_t; writer = T.Checkpoint_ack.bin_writer_t; to_j = ack_to_j; of_j = ack_of_j } );
    ("Heartbeat.t", C { reader = T.Heartbeat.bin_reader_t; writer = T.Heartbeat.bin_writer_t; to_j = hb_to_j; of_j = hb_of_j });
    ( "Schema_negotiation.t",
      C
        {
          reader = T.Schema_negotiation.bin_reader_t;
          writer = T.Schema_negotiation.bin_writer_t;
          to_j = neg_to_j;
          of_j = neg_of_j;
        } );
  ]

(* An OCaml type expression: a name, postfix option/list, or "(a * b)". *)
let rec codec_of_name name =
  let name = String.trim name in
  match List.assoc_opt name named with
  | Some c -> c
  | None ->
      let n = String.length name in
      if n > 2 && name.[0] = '(' && name.[n - 1] = ')' then begin
        let inner = String.sub name 1 (n - 2) in
        let star =
          match Str_split.find inner " * " with Some i -> i | None -> bad "unknown type %s" name
        in
        let (C a) = codec_of_name (String.sub inner 0 star) in
        let (C b) = codec_of_name (String.sub inner (star + 3) (String.length inner - star - 3)) in
        C
          {
            reader = TC.bin_reader_pair a.reader b.reader;
            writer = TC.bin_writer_pair a.writer b.writer;
            to_j = pair_to_j a.to_j b.to_j;
            of_j = pair_of_j a.of_j b.of_j;
          }
      end
      else
        match String.rindex_opt name ' ' with
        | Some i -> (
            let head = String.sub name 0 i and last = String.sub name (i + 1) (n - i - 1) in
            let (C c) = codec_of_name head in
            match last with
            | "option" ->
                C
                  {
                    reader = bin_reader_option c.reader;
                    writer = bin_writer_option c.writer;
                    to_j = opt_to_j c.to_j;
                    of_j = opt_of_j c.of_j;
                  }
            | "list" ->
                C
                  {
                    reader = bin_reader_list c.reader;
                    writer = bin_writer_list c.writer;
                    to_j = list_to_j c.to_j;
                    of_j = list_of_j c.of_j;
                  }
            | _ -> bad "unknown type %s" name)
        | None -> bad "unknown type %s" name

(* --- decoding with the failure named as bin_prot names it --------------- *)

type outcome =
  | Decoded of J.t * string (* the value, re-encoded *)
  | Trailing of int (* bin_prot read a value ending at this byte, before the end *)
  | Refused of string * int option (* bin_prot's ReadError constructor / exception, pos *)

let decode_with (C c) s =
  let len = String.length s in
  let buf = Bin_prot.Common.create_buf len in
  Bin_prot.Common.blit_string_buf s buf ~len;
  let pos_ref = ref 0 in
  match c.reader.read buf ~pos_ref with
  | v -> if !pos_ref <> len then Trailing !pos_ref else Decoded (c.to_j v, Codec.to_string c.writer v)
  | exception Bin_prot.Common.Read_error (e, pos) ->
      let name = Bin_prot.Common.ReadError.to_string e in
      let name = match Str_split.find name " / " with Some i -> String.sub name 0 i | None -> name in
      Refused (name, Some pos)
  | exception Bin_prot.Common.Buffer_short -> Refused ("Buffer_short", None)
  | exception Stack_overflow -> Refused ("Stack_overflow", None)
  | exception Failure m -> Refused ("Failure " ^ m, None)
  | exception Invalid_argument m -> Refused ("Invalid_argument " ^ m, None)

let encode_json (C c) j = Codec.to_string c.writer (c.of_j j)

(* --- reporting ---------------------------------------------------------- *)

let passed = ref 0
let failed = ref 0
let file_name = ref ""

let ok id =
  incr passed;
  Printf.printf "ok %s %s\n" !file_name id

let fail id fmt =
  Printf.ksprintf
    (fun s ->
      incr failed;
      Printf.printf "FAIL %s %s: %s\n" !file_name id s)
    fmt

(* Where two byte strings first differ, with both sides in hex. *)
let byte_diff ~expected ~got =
  let n = min (String.length expected) (String.length got) in
  let rec first i = if i < n && expected.[i] = got.[i] then first (i + 1) else i in
  let i = first 0 in
  Printf.sprintf "first difference at byte %d (expected %d bytes, got %d): expected %s, got %s" i (String.length expected)
    (String.length got) (Codec.hex expected) (Codec.hex got)

(* Run one check; a malformed vector is a failure of that vector, never a
   crash of the whole run. *)
let guarded id f =
  match f () with
  | () -> ()
  | exception Bad_json m -> fail id "vector not understood: %s" m
  | exception Yojson.Basic.Util.Type_error (m, _) -> fail id "vector not understood: %s" m
  | exception Invalid_argument m -> fail id "vector not understood: %s" m

(* A valid vector: bytes -> value -> bytes, and value -> bytes. *)
let check_valid id codec ~value ~hex ~canonical_hex =
  let bytes = Codec.unhex hex in
  let problems = ref [] in
  let add fmt = Printf.ksprintf (fun s -> problems := s :: !problems) fmt in
  (match decode_with codec bytes with
  | Decoded (v, re) ->
      if v <> value then add "bin_prot decoded %s, the vector says %s" (J.to_string v) (J.to_string value);
      if re <> canonical_hex then add "re-encoding differs: %s" (byte_diff ~expected:canonical_hex ~got:re)
  | Trailing pos -> add "bin_prot's value ends at byte %d of %d" pos (String.length bytes)
  | Refused (r, pos) ->
      add "bin_prot refused the bytes: %s%s" r (match pos with Some p -> Printf.sprintf " at byte %d" p | None -> ""));
  (match encode_json codec value with
  | enc -> if enc <> canonical_hex then add "bin_prot's encoding of the value differs: %s" (byte_diff ~expected:canonical_hex ~got:enc)
  | exception Bad_json m -> add "value not understood: %s" m);
  match !problems with [] -> ok id | ps -> fail id "%s" (String.concat "; " (List.rev ps))

(* An invalid vector: refused by the layer the vector names. *)
(* [informative_reason]: payloads.json's reasons are our codec's messages
   (vectors/ripp/README.md), which must name bin_prot's constructor; in
   binprot.json the reason is the constructor itself. *)
let informative_reason = ref false

let check_invalid id codec ~hex ~layer ~reason ~offset ~profile_check =
  let informative_reason = !informative_reason in
  let bytes = Codec.unhex hex in
  match (decode_with codec bytes, layer) with
  | Refused (r, pos), "bin_prot" -> (
      match reason with
      | Some want when want <> r && not (informative_reason && Str_split.find want r <> None) ->
          fail id "bin_prot refused with %s, the vector says %s" r want
      | _ -> (
          match (offset, pos) with
          | Some o, Some p when o <> p && r <> "Buffer_short" ->
              fail id "bin_prot refused (%s) at byte %d, the vector says byte %d" r p o
          | _ -> ok id))
  | Trailing _, ("whole-buffer" | "bin_prot" | "profile") when layer = "whole-buffer" -> ok id
  | Decoded _, "profile" -> (
      match profile_check bytes with
      | Some _ -> ok id
      | None -> fail id "bin_prot decodes it and no profile range rule refuses it")
  | Decoded (v, _), _ -> fail id "bin_prot decodes it (layer %s expected a refusal): %s" layer (J.to_string v)
  | Trailing p, _ -> fail id "bin_prot reads a value ending at byte %d (layer %s expected)" p layer
  | Refused (r, _), _ -> fail id "bin_prot refuses it (%s) but the vector's layer is %s" r layer

(* The profile's range rules (P3), for "profile"-layer vectors. *)
let profile_check type_name bytes =
  let run f = match f bytes with _ -> None | exception Codec.Decode_error m -> Some m in
  match type_name with
  | "Handshake.t" -> run Codec.decode_handshake
  | "Delta_msg.t" -> run Codec.decode_delta_msg
  | "Checkpoint_request.t" -> run Codec.decode_checkpoint_request
  | "Checkpoint_ack.t" -> run Codec.decode_checkpoint_ack
  | "Heartbeat.t" -> run Codec.decode_heartbeat
  | "Schema_negotiation.t" -> run Codec.decode_negotiation
  | "Delta.t" -> run Codec.decode_delta
  | "Schema.t" ->
      run (fun b ->
          match Codec.of_string T.Schema.bin_reader_t b with
          | Ok s -> Codec.check_schema_depth s
          | Error e -> raise (Codec.Decode_error e))
  | "int" ->
      (* An int64-class encoding outside OCaml's 63-bit int: bin_prot on a
         64-bit host reads it as Int_overflow; the profile refuses it. *)
      None
  | _ -> None

let opt_member name j = match j with `Assoc kv -> List.assoc_opt name kv | _ -> None
let mem_str name j = match opt_member name j with Some (`String s) -> Some s | _ -> None
let mem_int name j = match opt_member name j with Some (`Int i) -> Some i | _ -> None
let id_of j = Option.value (mem_str "id" j) ~default:"(no id)"

let valid_vectors j =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let codec = codec_of_name (j_str (j_field "type" v)) in
          let hex = j_str (j_field "hex" v) in
          let canonical = match opt_member "canonical" v with Some (`Bool false) -> false | _ -> true in
          let canonical_hex = Codec.unhex (if canonical then hex else j_str (j_field "canonical_hex" v)) in
          check_valid id codec ~value:(j_field "value" v) ~hex ~canonical_hex))
    j

let invalid_vectors j =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let type_name = j_str (j_field "type" v) in
          let codec = codec_of_name type_name in
          check_invalid id codec ~hex:(j_str (j_field "hex" v))
            ~layer:(Option.value (mem_str "layer" v) ~default:"bin_prot")
            ~reason:(mem_str "reason" v) ~offset:(mem_int "offset" v) ~profile_check:(profile_check type_name)))
    j

let list_member name j = match opt_member name j with Some (`List l) -> l | _ -> []

(* --- payloads.json extras ----------------------------------------------- *)

let schemas_vectors l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let s = Codec.schema_of_json (j_field "schema" v) in
          let enc = Codec.to_string T.Schema.bin_writer_t s in
          let want = Codec.unhex (j_str (j_field "schema_hex" v)) in
          let fp = Codec.fingerprint s in
          let want_fp = j_str (j_field "fingerprint" v) in
          if enc <> want then fail id "schema bytes: %s" (byte_diff ~expected:want ~got:enc)
          else if fp <> want_fp then fail id "fingerprint %s, the vector says %s" fp want_fp
          else ok id))
    l

let check_backward_vectors l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let reader = Codec.schema_of_json (j_field "reader" v) in
          let writer = Codec.schema_of_json (j_field "writer" v) in
          let want = List.map j_str (j_list (j_field "errors" v)) in
          let got = Codec.check_backward ~reader ~writer in
          if got = want then ok id
          else
            fail id "check_backward gives %s, the vector says %s"
              (J.to_string (`List (List.map (fun s -> `String s) got)))
              (J.to_string (`List (List.map (fun s -> `String s) want)))))
    l

let state_digest_vectors l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let entries =
            List.fold_left
              (fun m e ->
                match j_list e with
                | [ k; fs ] ->
                    let fields =
                      List.fold_left
                        (fun fm p ->
                          match j_list p with
                          | [ f; value ] -> Codec.SMap.add (str_of_j f) (str_of_j value) fm
                          | _ -> bad "bad field pair")
                        Codec.SMap.empty (j_list fs)
                    in
                    Codec.SMap.add (str_of_j k) fields m
                | _ -> bad "bad entry")
              Codec.SMap.empty
              (j_list (j_field "entries" v))
          in
          let got = Codec.hex (Codec.state_digest entries) in
          let want = j_str (j_field "digest" v) in
          if got = want then ok id else fail id "state digest %s, the vector says %s" got want))
    l

(* --- envelopes.json ----------------------------------------------------- *)

let crc_vectors l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let data = Codec.unhex (j_str (j_field "data_hex" v)) in
          let got = Printf.sprintf "%08x" (Crc32c.string data) in
          let want = String.lowercase_ascii (j_str (j_field "crc32c" v)) in
          if got = want then ok id else fail id "CRC-32C %s, the vector says %s" got want))
    l

let envelope_valid_vectors ~max_payload l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let bytes = Codec.unhex (j_str (j_field "hex" v)) in
          match Envelope.decode ~max_payload bytes with
          | exception Envelope.Envelope_error (c, m) -> fail id "refused (%s): %s" (Envelope.check_name c) m
          | e ->
              let want = j_field "envelope" v in
              let problems = ref [] in
              let add fmt = Printf.ksprintf (fun s -> problems := s :: !problems) fmt in
              let cmp name got wantj =
                if got <> wantj then add "%s %s, the vector says %s" name (J.to_string got) (J.to_string wantj)
              in
              cmp "version" (`Int e.version) (j_field "version" want);
              cmp "msg_type" (`Int e.msg_type) (j_field "msg_type" want);
              cmp "flags" (`Int e.flags) (j_field "flags" want);
              cmp "sequence" (int64_to_j e.sequence) (j_field "sequence" want);
              cmp "timestamp_ns" (int64_to_j e.timestamp_ns) (j_field "timestamp_ns" want);
              cmp "fingerprint_hex" (str_to_j e.fingerprint) (j_field "fingerprint_hex" want);
              cmp "payload_hex" (str_to_j e.payload) (j_field "payload_hex" want);
              let re = Envelope.encode e in
              if re <> bytes then add "re-encoded envelope differs: %s" (byte_diff ~expected:bytes ~got:re);
              (match mem_str "crc32c" v with
              | Some c ->
                  let stored = String.sub bytes (String.length bytes - 4) 4 in
                  let value = Printf.sprintf "%02x%02x%02x%02x" (Char.code stored.[3]) (Char.code stored.[2]) (Char.code stored.[1]) (Char.code stored.[0]) in
                  if value <> String.lowercase_ascii c then add "stored CRC %s, the vector says %s" value c
              | None -> ());
              (match opt_member "payload_type" v with
              | Some (`String t) -> (
                  match decode_with (codec_of_name t) e.payload with
                  | Decoded (_, re) -> if re <> e.payload then add "payload re-encoding differs: %s" (byte_diff ~expected:e.payload ~got:re)
                  | Trailing p -> add "payload: bin_prot's %s ends at byte %d" t p
                  | Refused (r, _) -> add "payload: bin_prot refuses it as %s (%s)" t r)
              | _ -> ());
              match !problems with [] -> ok id | ps -> fail id "%s" (String.concat "; " (List.rev ps))))
    l

let envelope_invalid_vectors ~max_payload l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let bytes = Codec.unhex (j_str (j_field "hex" v)) in
          let want = j_str (j_field "check" v) in
          match Envelope.decode ~max_payload bytes with
          | _ -> fail id "accepted; the vector says %s refuses it" want
          | exception Envelope.Envelope_error (c, m) ->
              if Envelope.check_name c = want then ok id else fail id "refused by %s (%s); the vector says %s" (Envelope.check_name c) m want))
    l

let stream_vectors ~max_payload l =
  List.iter
    (fun v ->
      let id = id_of v in
      guarded id (fun () ->
          let mp = Option.value (mem_int "max_payload" v) ~default:max_payload in
          let r = Envelope.Reader.create ~max_payload:mp in
          let count = ref 0 and err = ref None in
          List.iter
            (fun c ->
              if !err = None then begin
                let envs, e = Envelope.Reader.receive r (Codec.unhex (j_str c)) in
                count := !count + List.length envs;
                err := e
              end)
            (j_list (j_field "chunks_hex" v));
          let want_n = match j_field "envelopes" v with `Int n -> n | `List l -> List.length l | j -> bad "bad envelopes %s" (J.to_string j) in
          let want_err = match j_field "error_check" v with `Null -> None | j -> Some (j_str j) in
          let got_err = Option.map (fun (c, _) -> Envelope.check_name c) !err in
          if !count <> want_n || got_err <> want_err then
            fail id "%d envelope(s) then %s; the vector says %d then %s" !count
              (Option.value got_err ~default:"no refusal") want_n (Option.value want_err ~default:"no refusal")
          else ok id))
    l

let run path =
  file_name := Filename.basename path;
  let j = try J.from_file path with e -> Printf.eprintf "error: %s: %s\n" path (Printexc.to_string e); exit 2 in
  (match mem_str "component" j with
  | Some "bin_prot" ->
      valid_vectors (list_member "valid" j);
      invalid_vectors (list_member "invalid" j)
  | Some "payloads" ->
      informative_reason := true;
      valid_vectors (list_member "messages" j);
      valid_vectors (list_member "values" j);
      schemas_vectors (list_member "schemas" j);
      check_backward_vectors (list_member "check_backward" j);
      state_digest_vectors (list_member "state_digests" j);
      invalid_vectors (list_member "invalid" j)
  | Some ("envelopes" | "envelope") ->
      let max_payload = Option.value (mem_int "max_payload" j) ~default:Envelope.max_payload in
      crc_vectors (list_member "crc32c" j);
      envelope_valid_vectors ~max_payload (list_member "valid" j);
      envelope_invalid_vectors ~max_payload (list_member "invalid" j);
      stream_vectors ~max_payload (list_member "streams" j)
  | c ->
      Printf.eprintf "error: %s: unknown component %s\n" path (Option.value c ~default:"(none)");
      exit 2);
  Printf.printf "%d passed, %d failed\n" !passed !failed;
  if !failed > 0 || !passed = 0 then 1 else 0

(* `ripp_peer decode`: one "TYPE<TAB>HEX" per stdin line, one answer line
   each, flushed, for differential tests against another codec:
     ok<TAB>RE-ENCODED-HEX<TAB>JSON-VALUE
     trailing<TAB>POS        (bin_prot read a value that ends before the bytes)
     refused<TAB>NAME<TAB>POS|-   (bin_prot's ReadError constructor or exception)
     error<TAB>MESSAGE       (the line itself is not understood) *)
let decode_loop () =
  let answer fmt = Printf.ksprintf (fun s -> print_string s; print_char '\n'; flush stdout) fmt in
  try
    while true do
      let line = input_line stdin in
      match String.index_opt line '\t' with
      | None -> answer "error\tno tab"
      | Some i -> (
          let type_name = String.sub line 0 i and hex = String.sub line (i + 1) (String.length line - i - 1) in
          match (codec_of_name type_name, Codec.unhex hex) with
          | exception Bad_json m -> answer "error\t%s" m
          | exception Invalid_argument m -> answer "error\t%s" m
          | exception Failure m -> answer "error\t%s" m
          | codec, bytes -> (
              match decode_with codec bytes with
              | Decoded (v, re) -> answer "ok\t%s\t%s" (Codec.hex re) (J.to_string v)
              | Trailing pos -> answer "trailing\t%d" pos
              | Refused (r, pos) -> answer "refused\t%s\t%s" r (match pos with Some p -> string_of_int p | None -> "-")))
    done;
    0
  with End_of_file -> 0
