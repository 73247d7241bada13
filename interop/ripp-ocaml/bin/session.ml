(* RIPP sessions, sans-I/O (docs/ripp-profile.md P2-P9): bytes and times
   in, bytes and events out; no socket, no clock. Written from the profile,
   not from reference_impl/ripp/session.py, so that certifying this peer
   checks the profile rather than one implementation against itself.

   Times are monotonic nanoseconds (int, 63 bits is plenty). Events are
   (name, JSON fields) pairs; the I/O layer prints them as
   "RIPP_<NAME> {json}" lines, the reference node's output form. *)

module T = Types
module J = Yojson.Basic

type closed = { kind : string; reason : string; check : string option }
type event = string * (string * J.t) list

let ns_per_ms = 1_000_000
let handshake_timeout_ns = 10_000_000_000 (* P5 *)
let liveness_intervals = 3 (* P8 *)
let zero_fingerprint = String.make 32 '\000'

exception Close of closed

let close kind fmt = Printf.ksprintf (fun reason -> raise (Close { kind; reason; check = None })) fmt

let closed_event c =
  ( "CLOSED",
    [ ("kind", `String c.kind); ("reason", `String c.reason); ("check", match c.check with Some s -> `String s | None -> `Null) ] )

let type_name = function
  | 0 -> "HANDSHAKE" | 1 -> "DELTA" | 2 -> "CHECKPOINT_REQUEST" | 3 -> "CHECKPOINT_ACK"
  | 4 -> "HEARTBEAT" | 5 -> "SCHEMA_NEGOTIATION" | n -> string_of_int n

(* What both roles share: the envelope reader, the outgoing buffer and the
   per-connection envelope counter (P6: 1 for the first envelope). *)
type base = {
  reader : Envelope.Reader.r;
  out : Buffer.t;
  mutable sequence : int;
  mutable closed : closed option;
  wall_ns : unit -> int64; (* envelope timestamps: ns since the epoch (P1) *)
}

let make_base ~max_payload ~wall_ns =
  { reader = Envelope.Reader.create ~max_payload; out = Buffer.create 1024; sequence = 0; closed = None; wall_ns }

let send b ~msg_type ?(fingerprint = zero_fingerprint) ?timestamp_ns payload =
  b.sequence <- b.sequence + 1;
  let e =
    {
      Envelope.version = Envelope.version;
      msg_type;
      flags = 0;
      sequence = Int64.of_int b.sequence;
      timestamp_ns = (match timestamp_ns with Some t -> t | None -> b.wall_ns ());
      fingerprint;
      payload;
    }
  in
  Buffer.add_string b.out (Envelope.encode e)

let take_output b =
  let s = Buffer.contents b.out in
  Buffer.clear b.out;
  s

(* Feed bytes; [handle] runs per envelope; any Close (or envelope error)
   ends the session and becomes the last event. *)
let receive b data ~handle =
  if b.closed <> None then []
  else begin
    let envs, err = Envelope.Reader.receive b.reader data in
    let events = ref [] in
    let finish c =
      b.closed <- Some c;
      events := closed_event c :: !events
    in
    (try
       List.iter (fun e -> if b.closed = None then events := List.rev_append (handle e) !events) envs;
       match err with
       | Some (c, m) when b.closed = None -> finish { kind = "envelope"; reason = m; check = Some (Envelope.check_name c) }
       | _ -> ()
     with Close c -> finish c);
    List.rev !events
  end

let guard b f =
  if b.closed <> None then []
  else
    try f () with
    | Close c ->
        b.closed <- Some c;
        [ closed_event c ]

let eof b = guard b (fun () -> close "peer" "the peer closed the connection")

(* Codec's decoders name the type in their message already. *)
let decode b _name f payload =
  ignore b;
  try f payload with Codec.Decode_error m -> close "payload" "%s" m

(* --- consumer ----------------------------------------------------------- *)

type track = {
  schema : T.Schema.t;
  fp : string;
  mutable last : int;
  mutable applied : int;
  mutable entries : Codec.entries;
}

type consumer = {
  cb : base;
  worker_id : string;
  registry : (string * T.Schema.t) list;
  heartbeat_ms : int;
  started : int;
  mutable state : [ `Await | `Open ];
  mutable source_worker : string;
  mutable sources : (string * track) list; (* Handshake order *)
  mutable last_heartbeat : int;
}

let consumer ~worker_id ~registry ~heartbeat_ms ~max_payload ~wall_ns ~now =
  {
    cb = make_base ~max_payload ~wall_ns;
    worker_id;
    registry;
    heartbeat_ms;
    started = now;
    state = `Await;
    source_worker = "";
    sources = [];
    last_heartbeat = now;
  }

let checkpoint_ack c checkpoint_id : T.Checkpoint_ack.t =
  {
    checkpoint_id;
    worker_id = c.worker_id;
    sources =
      List.sort (fun (a, _) (b, _) -> String.compare a b) c.sources
      |> List.map (fun (name, t) ->
             {
               T.Checkpoint_ack.source_output = name;
               last_sequence_no = t.last;
               applied_count = t.applied;
               state_digest = Codec.state_digest t.entries;
             });
  }

let ack_event (a : T.Checkpoint_ack.t) extra =
  ( "CHECKPOINT",
    extra
    @ [
        ("checkpoint_id", `Int a.checkpoint_id);
        ( "sources",
          `List
            (List.map
               (fun (s : T.Checkpoint_ack.source_state) ->
                 `Assoc
                   [
                     ("output", `String s.source_output);
                     ("last_sequence_no", `Int s.last_sequence_no);
                     ("applied_count", `Int s.applied_count);
                     ("state_digest", `String (Codec.hex s.state_digest));
                   ])
               a.sources) );
      ] )

let on_handshake c now (hs : T.Handshake.t) =
  let errors = Codec.negotiate c.registry hs in
  let ok = errors = [] in
  let neg =
    {
      T.Schema_negotiation.ok;
      errors;
      protocol_version = Codec.protocol_version;
      heartbeat_interval_ms = c.heartbeat_ms;
      worker_id = c.worker_id;
    }
  in
  send c.cb ~msg_type:5 (Codec.to_string T.Schema_negotiation.bin_writer_t neg);
  let ev = ("NEGOTIATED", [ ("ok", `Bool ok); ("errors", `List (List.map (fun e -> `String e) errors)) ]) in
  if not ok then begin
    (* P5: answer, then close once it is written ("[connection rejected]"). *)
    let cl = { kind = "rejected"; reason = String.concat "; " errors; check = None } in
    c.cb.closed <- Some cl;
    [ ev; closed_event cl ]
  end
  else begin
    c.source_worker <- hs.source_worker_id;
    c.sources <-
      List.map
        (fun (name, schema) ->
          (name, { schema; fp = Codec.fingerprint schema; last = 0; applied = 0; entries = Codec.SMap.empty }))
        hs.output_schemas;
    c.state <- `Open;
    (* Liveness counts from the negotiation: the first Heartbeat is due
       one interval later (P8). *)
    c.last_heartbeat <- now;
    [ ev ]
  end

let validate_delta (t : track) (d : T.Delta.t) =
  match d with
  | T.Delta.Remove -> ()
  | Set fs | Patch fs ->
      List.iter
        (fun (fv : T.Delta.field_value) ->
          match List.find_opt (fun (f : T.Schema.field) -> f.field_name = fv.field) t.schema.fields with
          | None -> close "payload" "Delta.t names field %S, not in the writer schema" fv.field
          | Some f ->
              if not (Codec.value_decodes f.field_type fv.value) then
                close "payload" "value of field %S is not a %s" fv.field (Codec.type_to_string f.field_type))
        fs

let on_delta c (env : Envelope.t) =
  (* P4: the fingerprint is checked before the payload is decoded. *)
  if not (List.exists (fun (_, t) -> t.fp = env.fingerprint) c.sources) then
    close "protocol" "Delta fingerprint %S is not a negotiated writer schema" (Envelope.fingerprint_name env.fingerprint);
  let (m : T.Delta_msg.t) = decode c.cb "Delta_msg.t" Codec.decode_delta_msg env.payload in
  let t =
    match List.assoc_opt m.source_output c.sources with
    | Some t -> t
    | None -> close "protocol" "Delta for output %S, not declared in the Handshake" m.source_output
  in
  if t.fp <> env.fingerprint then
    close "protocol" "Delta for %S carries fingerprint %S, its schema's is %S" m.source_output
      (Envelope.fingerprint_name env.fingerprint) t.fp;
  let seq = m.sequence_no in
  if seq <= t.last then
    (* The text's set_remote: "Already seen -- idempotent discard" (P6). *)
    [ ("DUPLICATE", [ ("output", `String m.source_output); ("sequence_no", `Int seq); ("last", `Int t.last) ]) ]
  else begin
    let d = decode c.cb "Delta.t" Codec.decode_delta m.delta_bytes in
    validate_delta t d;
    let gap =
      if seq > t.last + 1 then
        [ ("GAP", [ ("output", `String m.source_output); ("missing", `List [ `Int (t.last + 1); `Int (seq - 1) ]) ]) ]
      else []
    in
    t.entries <- Codec.apply_delta t.entries m.key d;
    t.applied <- t.applied + 1;
    t.last <- seq;
    gap @ [ ("APPLIED", [ ("output", `String m.source_output); ("sequence_no", `Int seq) ]) ]
  end

let unexpected role state (env : Envelope.t) =
  close "protocol" "%s is not expected by a %s in state %s" (type_name env.msg_type) role state

let consumer_handle c now (env : Envelope.t) =
  match (c.state, env.msg_type) with
  | `Await, 0 -> on_handshake c now (decode c.cb "Handshake.t" Codec.decode_handshake env.payload)
  | `Await, _ -> unexpected "consumer" "await_handshake" env
  | `Open, 1 -> on_delta c env
  | `Open, 2 ->
      let (r : T.Checkpoint_request.t) = decode c.cb "Checkpoint_request.t" Codec.decode_checkpoint_request env.payload in
      let ack = checkpoint_ack c r.checkpoint_id in
      send c.cb ~msg_type:3 (Codec.to_string T.Checkpoint_ack.bin_writer_t ack);
      [ ack_event ack [] ]
  | `Open, 4 ->
      let (h : T.Heartbeat.t) = decode c.cb "Heartbeat.t" Codec.decode_heartbeat env.payload in
      if h.worker_id <> c.source_worker then
        close "protocol" "Heartbeat worker_id %S is not the Handshake's %S" h.worker_id c.source_worker;
      c.last_heartbeat <- now;
      []
  | `Open, _ -> unexpected "consumer" "open" env

let consumer_receive c data now = receive c.cb data ~handle:(consumer_handle c now)

let consumer_deadline c =
  if c.cb.closed <> None then None
  else
    match c.state with
    | `Await -> Some (c.started + handshake_timeout_ns)
    | `Open -> Some (c.last_heartbeat + (liveness_intervals * c.heartbeat_ms * ns_per_ms))

let consumer_poll c now =
  guard c.cb (fun () ->
      match c.state with
      | `Await when now - c.started >= handshake_timeout_ns -> close "timeout" "no Handshake within the handshake timeout"
      | `Open when now - c.last_heartbeat >= liveness_intervals * c.heartbeat_ms * ns_per_ms ->
          close "liveness" "no Heartbeat for %d intervals of %d ms" liveness_intervals c.heartbeat_ms
      | _ -> [])

(* --- producer ----------------------------------------------------------- *)

type producer = {
  pb : base;
  source_id : string;
  outputs : (string * T.Schema.t) list;
  fingerprints : (string * string) list;
  mutable pstate : [ `Await | `Open ];
  pstarted : int;
  timeout_ns : int;
  mutable negotiation : T.Schema_negotiation.t option;
  mutable next_heartbeat : int;
  mutable next_seq : (string * int) list;
  mutable requested : int list;
  mutable acks : T.Checkpoint_ack.t list;
  mutable heartbeats : int;
  load : float;
}

let producer ~source_id ~outputs ~timeout_ns ~max_payload ~wall_ns ~now =
  let p =
    {
      pb = make_base ~max_payload ~wall_ns;
      source_id;
      outputs;
      fingerprints = List.map (fun (n, s) -> (n, Codec.fingerprint s)) outputs;
      pstate = `Await;
      pstarted = now;
      timeout_ns;
      negotiation = None;
      next_heartbeat = 0;
      next_seq = List.map (fun (n, _) -> (n, 1)) outputs;
      requested = [];
      acks = [];
      heartbeats = 0;
      load = 0.0;
    }
  in
  let hs = { T.Handshake.source_worker_id = source_id; output_schemas = outputs; protocol_version = Codec.protocol_version } in
  send p.pb ~msg_type:0 (Codec.to_string T.Handshake.bin_writer_t hs);
  p

let interval_ns p = match p.negotiation with Some n -> n.heartbeat_interval_ms * ns_per_ms | None -> 0

let producer_handle p now (env : Envelope.t) =
  match (p.pstate, env.msg_type) with
  | `Await, 5 ->
      let (n : T.Schema_negotiation.t) = decode p.pb "Schema_negotiation.t" Codec.decode_negotiation env.payload in
      p.negotiation <- Some n;
      let ev =
        ( "NEGOTIATED",
          [
            ("ok", `Bool n.ok);
            ("errors", `List (List.map (fun e -> `String e) n.errors));
            ("heartbeat_interval_ms", `Int n.heartbeat_interval_ms);
          ] )
      in
      if n.protocol_version <> Codec.protocol_version then begin
        let cl = { kind = "protocol"; reason = Printf.sprintf "consumer speaks protocol version %d" n.protocol_version; check = None } in
        p.pb.closed <- Some cl;
        [ ev; closed_event cl ]
      end
      else if not n.ok then begin
        let cl = { kind = "rejected"; reason = (if n.errors = [] then "negotiation failed" else String.concat "; " n.errors); check = None } in
        p.pb.closed <- Some cl;
        [ ev; closed_event cl ]
      end
      else begin
        p.pstate <- `Open;
        p.next_heartbeat <- now + interval_ns p;
        [ ev ]
      end
  | `Await, _ -> unexpected "producer" "await_negotiation" env
  | `Open, 3 ->
      let (a : T.Checkpoint_ack.t) = decode p.pb "Checkpoint_ack.t" Codec.decode_checkpoint_ack env.payload in
      if not (List.mem a.checkpoint_id p.requested) then
        close "protocol" "Checkpoint_ack for checkpoint %d, never requested" a.checkpoint_id;
      p.requested <- List.filter (( <> ) a.checkpoint_id) p.requested;
      p.acks <- a :: p.acks;
      [ ack_event a [] ]
  | `Open, _ -> unexpected "producer" "open" env

let producer_receive p data now = receive p.pb data ~handle:(producer_handle p now)

let producer_deadline p =
  if p.pb.closed <> None then None
  else match p.pstate with `Await -> Some (p.pstarted + p.timeout_ns) | `Open -> Some p.next_heartbeat

let producer_poll p now =
  guard p.pb (fun () ->
      match p.pstate with
      | `Await when now - p.pstarted >= p.timeout_ns -> close "timeout" "no Schema_negotiation within the handshake timeout"
      | `Open when now >= p.next_heartbeat ->
          let hb = { T.Heartbeat.worker_id = p.source_id; timestamp_ns = p.pb.wall_ns (); load = p.load } in
          send p.pb ~msg_type:4 (Codec.to_string T.Heartbeat.bin_writer_t hb);
          p.heartbeats <- p.heartbeats + 1;
          p.next_heartbeat <- p.next_heartbeat + interval_ns p;
          (* Polled late (a stalled loop): no burst to catch up. *)
          if p.next_heartbeat <= now then p.next_heartbeat <- now + interval_ns p;
          []
      | _ -> [])

let send_delta p ~output ~key ~(delta : T.Delta.t) ?sequence_no () =
  let seq = match sequence_no with Some s -> s | None -> List.assoc output p.next_seq in
  p.next_seq <- List.map (fun (n, s) -> if n = output then (n, max s (seq + 1)) else (n, s)) p.next_seq;
  let m =
    {
      T.Delta_msg.source_output = output;
      key;
      delta_bytes = Codec.to_string T.Delta.bin_writer_t delta;
      sequence_no = seq;
      watermark_ns = None;
    }
  in
  send p.pb ~msg_type:1 ~fingerprint:(List.assoc output p.fingerprints) (Codec.to_string T.Delta_msg.bin_writer_t m)

let request_checkpoint p id =
  p.requested <- id :: p.requested;
  send p.pb ~msg_type:2 (Codec.to_string T.Checkpoint_request.bin_writer_t { T.Checkpoint_request.checkpoint_id = id })
