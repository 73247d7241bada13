(* Helpers around the real bin_prot library: whole-string encode and
   complete decode of a derived type, hex, and the profile's checks that
   bin_prot types cannot carry (docs/ripp-profile.md P3-P7). Nothing here
   encodes or decodes bin_prot by hand: every payload byte goes through the
   readers and writers ppx_bin_prot derived from Types, or bin_prot's own
   primitives (Bin_prot.Std / Read / Write). *)

open Bin_prot.Std

exception Decode_error of string

let to_string (w : 'a Bin_prot.Type_class.writer) v =
  let len = w.size v in
  let buf = Bin_prot.Common.create_buf len in
  let pos = w.write buf ~pos:0 v in
  assert (pos = len);
  let b = Bytes.create len in
  Bin_prot.Common.blit_buf_bytes buf b ~len;
  Bytes.unsafe_to_string b

(* Decode [s] entirely as the type of [r]; [Error reason] when bin_prot's
   reader refuses it, runs past its end, or leaves bytes over. *)
let of_string (r : 'a Bin_prot.Type_class.reader) s =
  let len = String.length s in
  let buf = Bin_prot.Common.create_buf len in
  Bin_prot.Common.blit_string_buf s buf ~len;
  let pos_ref = ref 0 in
  match r.read buf ~pos_ref with
  | v -> if !pos_ref <> len then Error (Printf.sprintf "%d byte(s) left over at byte %d" (len - !pos_ref) !pos_ref) else Ok v
  | exception Bin_prot.Common.Read_error (e, pos) ->
      Error (Printf.sprintf "bin_prot Read_error %s at byte %d" (Bin_prot.Common.ReadError.to_string e) pos)
  | exception Bin_prot.Common.Buffer_short -> Error "truncated (bin_prot Buffer_short)"
  (* A payload nesting variants a million deep could exhaust the stack of
     the derived (recursive) reader; OCaml turns that into an exception. *)
  | exception Stack_overflow -> Error "nesting too deep (stack overflow while decoding)"
  | exception Failure m -> Error ("bin_prot Failure " ^ m)
  | exception Invalid_argument m -> Error ("bin_prot Invalid_argument " ^ m)

let hex s =
  let b = Buffer.create (2 * String.length s) in
  String.iter (fun c -> Buffer.add_string b (Printf.sprintf "%02x" (Char.code c))) s;
  Buffer.contents b

let unhex h =
  let h = String.trim h in
  if String.length h mod 2 <> 0 then invalid_arg "odd-length hex";
  String.init (String.length h / 2) (fun i -> Char.chr (int_of_string ("0x" ^ String.sub h (2 * i) 2)))

(* --- Schema ------------------------------------------------------------- *)

module S = Types.Schema

let max_type_depth = 32

let rec type_depth = function
  | S.Option t | S.List t -> 1 + type_depth t
  | _ -> 0

(* OCaml syntax, as check_backward's "type mismatch" error prints it (P5). *)
let rec type_to_string = function
  | S.Int -> "int"
  | S.Int64 -> "int64"
  | S.Float -> "float"
  | S.Bool -> "bool"
  | S.String -> "string"
  | S.Option t -> type_to_string t ^ " option"
  | S.List t -> type_to_string t ^ " list"

let type_of_string text =
  match String.split_on_char ' ' text |> List.filter (( <> ) "") with
  | [] -> invalid_arg ("bad field type " ^ text)
  | base :: rest ->
      let t =
        match base with
        | "int" -> S.Int
        | "int64" -> S.Int64
        | "float" -> S.Float
        | "bool" -> S.Bool
        | "string" -> S.String
        | _ -> invalid_arg ("bad field type " ^ text)
      in
      List.fold_left
        (fun t w ->
          match w with
          | "option" -> S.Option t
          | "list" -> S.List t
          | _ -> invalid_arg ("bad field type " ^ text))
        t rest

(* A bin_prot reader that checks a value of a field type and discards it,
   composed from bin_prot's own primitive readers. *)
let rec value_reader : S.field_type -> unit Bin_prot.Read.reader = function
  | S.Int -> fun buf ~pos_ref -> ignore (bin_read_int buf ~pos_ref)
  | S.Int64 -> fun buf ~pos_ref -> ignore (bin_read_int64 buf ~pos_ref)
  | S.Float -> fun buf ~pos_ref -> ignore (bin_read_float buf ~pos_ref)
  | S.Bool -> fun buf ~pos_ref -> ignore (bin_read_bool buf ~pos_ref)
  | S.String -> fun buf ~pos_ref -> ignore (bin_read_string buf ~pos_ref)
  | S.Option t ->
      let r = value_reader t in
      fun buf ~pos_ref -> ignore (bin_read_option r buf ~pos_ref)
  | S.List t ->
      let r = value_reader t in
      fun buf ~pos_ref -> ignore (bin_read_list r buf ~pos_ref)

let value_decodes t s =
  let read = value_reader t in
  match of_string { Bin_prot.Type_class.read; vtag_read = (fun _ ~pos_ref:_ _ -> assert false) } s with
  | Ok () -> true
  | Error _ -> false

let fingerprint (s : S.t) = Digest.to_hex (Digest.string (to_string S.bin_writer_t s))

(* JSON schema files (P5): {"<output>": {"schema_name", "version",
   "fields": [{"name", "type", "default": null | "<hex>"}]}}. *)
let schema_of_json (j : Yojson.Basic.t) : S.t =
  let open Yojson.Basic.Util in
  {
    S.schema_name = j |> member "schema_name" |> to_string;
    version = j |> member "version" |> to_int;
    fields =
      j |> member "fields" |> to_list
      |> List.map (fun f ->
             {
               S.field_name = f |> member "name" |> to_string;
               field_type = f |> member "type" |> to_string |> type_of_string;
               default = (match f |> member "default" with `Null -> None | d -> Some (unhex (to_string d)));
             });
  }

let registry_of_json (j : Yojson.Basic.t) =
  match j with
  | `Assoc kv -> List.map (fun (name, s) -> (name, schema_of_json s)) kv
  | _ -> invalid_arg "a schema file maps output names to schemas"

(* check_backward(reader, writer), the profile's errors in its order (P5). *)
let duplicates (s : S.t) =
  let seen = Hashtbl.create 8 in
  List.fold_left
    (fun dups (f : S.field) ->
      let d = if Hashtbl.mem seen f.field_name && not (List.mem f.field_name dups) then dups @ [ f.field_name ] else dups in
      Hashtbl.replace seen f.field_name ();
      d)
    [] s.fields

let check_backward ~(reader : S.t) ~(writer : S.t) =
  let errors = ref [] in
  let add e = errors := e :: !errors in
  if reader.schema_name <> writer.schema_name then
    add (Printf.sprintf "schema name mismatch: reader %s writer %s" reader.schema_name writer.schema_name);
  let wd = duplicates writer in
  List.iter (fun n -> add ("duplicate field " ^ n)) (wd @ List.filter (fun n -> not (List.mem n wd)) (duplicates reader));
  List.iter
    (fun (f : S.field) ->
      match f.default with
      | Some d when not (value_decodes f.field_type d) -> add ("invalid default for field " ^ f.field_name)
      | _ -> ())
    reader.fields;
  let written = Hashtbl.create 8 in
  List.iter (fun (f : S.field) -> if not (Hashtbl.mem written f.field_name) then Hashtbl.add written f.field_name f) writer.fields;
  let done_ = Hashtbl.create 8 in
  List.iter
    (fun (f : S.field) ->
      if not (Hashtbl.mem done_ f.field_name) then begin
        Hashtbl.add done_ f.field_name ();
        match Hashtbl.find_opt written f.field_name with
        | None -> if f.default = None then add ("missing field " ^ f.field_name)
        | Some (w : S.field) ->
            if w.field_type <> f.field_type then
              add
                (Printf.sprintf "type mismatch for field %s: reader %s writer %s" f.field_name
                   (type_to_string f.field_type) (type_to_string w.field_type))
      end)
    reader.fields;
  List.rev !errors

let protocol_version = 1

let negotiate registry (hs : Types.Handshake.t) =
  if hs.protocol_version <> protocol_version then [ Printf.sprintf "unsupported protocol version %d" hs.protocol_version ]
  else begin
    let seen = Hashtbl.create 8 in
    List.concat_map
      (fun (output, writer) ->
        if Hashtbl.mem seen output then [ output ^ ": duplicate output" ]
        else begin
          Hashtbl.add seen output ();
          match List.assoc_opt output registry with
          | None -> [ output ^ ": unknown output" ]
          | Some reader -> List.map (fun e -> output ^ ": " ^ e) (check_backward ~reader ~writer)
        end)
      hs.output_schemas
  end

(* --- range rules (P3) --------------------------------------------------- *)

let heartbeat_min_ms = 10
let heartbeat_max_ms = 3_600_000

let check_schema_depth (s : S.t) =
  List.iter
    (fun (f : S.field) ->
      if type_depth f.field_type > max_type_depth then
        raise (Decode_error (Printf.sprintf "field %s: type nests more than %d deep" f.field_name max_type_depth)))
    s.fields

(* Decoders of each message type's payload with the profile's range rules. *)
let decode_or_fail name r s =
  match of_string r s with Ok v -> v | Error e -> raise (Decode_error (name ^ ": " ^ e))

let decode_handshake s =
  let (hs : Types.Handshake.t) = decode_or_fail "Handshake.t" Types.Handshake.bin_reader_t s in
  List.iter (fun (_, sch) -> check_schema_depth sch) hs.output_schemas;
  hs

let decode_delta_msg s =
  let (d : Types.Delta_msg.t) = decode_or_fail "Delta_msg.t" Types.Delta_msg.bin_reader_t s in
  if d.sequence_no < 1 then raise (Decode_error (Printf.sprintf "sequence_no %d below 1" d.sequence_no));
  d

let decode_checkpoint_request s =
  let (r : Types.Checkpoint_request.t) = decode_or_fail "Checkpoint_request.t" Types.Checkpoint_request.bin_reader_t s in
  if r.checkpoint_id < 0 then raise (Decode_error (Printf.sprintf "checkpoint_id %d negative" r.checkpoint_id));
  r

let decode_checkpoint_ack s =
  let (a : Types.Checkpoint_ack.t) = decode_or_fail "Checkpoint_ack.t" Types.Checkpoint_ack.bin_reader_t s in
  if a.checkpoint_id < 0 then raise (Decode_error (Printf.sprintf "checkpoint_id %d negative" a.checkpoint_id));
  a

let decode_heartbeat s =
  let (h : Types.Heartbeat.t) = decode_or_fail "Heartbeat.t" Types.Heartbeat.bin_reader_t s in
  if not (Float.is_finite h.load && h.load >= 0.0 && h.load <= 1.0) then
    raise (Decode_error (Printf.sprintf "load %h outside [0.0, 1.0]" h.load));
  h

let decode_negotiation s =
  let (n : Types.Schema_negotiation.t) = decode_or_fail "Schema_negotiation.t" Types.Schema_negotiation.bin_reader_t s in
  if n.heartbeat_interval_ms < heartbeat_min_ms || n.heartbeat_interval_ms > heartbeat_max_ms then
    raise
      (Decode_error
         (Printf.sprintf "heartbeat_interval_ms %d outside %d..%d" n.heartbeat_interval_ms heartbeat_min_ms heartbeat_max_ms));
  n

let decode_delta s =
  let (d : Types.Delta.t) = decode_or_fail "Delta.t" Types.Delta.bin_reader_t s in
  (match d with
  | Types.Delta.Set fs | Types.Delta.Patch fs ->
      let names = List.map (fun (fv : Types.Delta.field_value) -> fv.field) fs in
      if List.length (List.sort_uniq compare names) <> List.length names then
        raise (Decode_error "Delta.t names a field twice")
  | Types.Delta.Remove -> ());
  d

(* --- applied state and its digest (P6, P7) ----------------------------- *)

type state = (string * (string * string) list) list [@@deriving bin_io]

module SMap = Map.Make (String)

(* key -> field -> value bytes; String.compare is bytewise, as P7 sorts. *)
type entries = string SMap.t SMap.t

let state_digest (e : entries) =
  let canonical : state = SMap.bindings e |> List.map (fun (k, fs) -> (k, SMap.bindings fs)) in
  Digest.string (to_string bin_writer_state canonical)

let apply_delta (e : entries) key (d : Types.Delta.t) =
  let of_list fs base = List.fold_left (fun m (fv : Types.Delta.field_value) -> SMap.add fv.field fv.value m) base fs in
  match d with
  | Types.Delta.Set fs -> SMap.add key (of_list fs SMap.empty) e
  | Types.Delta.Patch fs ->
      let base = Option.value (SMap.find_opt key e) ~default:SMap.empty in
      SMap.add key (of_list fs base) e
  | Types.Delta.Remove -> SMap.remove key e
