(* The RIPP envelope (ripp-wire-protocol.txt, "Message Envelope Format"):

     0  4  magic        4  1 version   5 1 type   6 1 flags
     7  8  sequence (int64 LE)         15 8 timestamp ns (int64 LE)
     23 32 schema fingerprint (zero-padded ASCII)
     55 4  payload length (int32 LE)   59 N payload (bin_prot)
     59+N 4 CRC-32C over bytes 0 .. 59+N-1 (LE)

   Decoding checks run in the order the project's profile fixes, before any
   payload parsing: length bounds, magic, CRC, version, type, flags
   (docs/ripp-profile.md P1). *)

let header_len = 59
let overhead = 63

(* The magic's bytes on the wire, as docs/ripp-profile.md fixes them. *)
let magic = "RIPP"
let version = 1

(* MAX_PAYLOAD of the profile (P1): 1 MiB. *)
let max_payload = 1_048_576

type t = {
  version : int;
  msg_type : int;
  flags : int;
  sequence : int64;
  timestamp_ns : int64;
  fingerprint : string; (* exactly 32 bytes *)
  payload : string;
}

type error_check = Length | Magic | Crc | Version | Type | Flags

let check_name = function
  | Length -> "length" | Magic -> "magic" | Crc -> "crc" | Version -> "version" | Type -> "type" | Flags -> "flags"

exception Envelope_error of error_check * string

let fingerprint_of_name name =
  if String.length name > 32 then invalid_arg "fingerprint longer than 32 bytes";
  name ^ String.make (32 - String.length name) '\000'

(* The fingerprint without its zero padding. *)
let fingerprint_name fp =
  match String.index_opt fp '\000' with Some i -> String.sub fp 0 i | None -> fp

let encode e =
  if String.length e.fingerprint <> 32 then invalid_arg "fingerprint must be 32 bytes";
  let n = String.length e.payload in
  let b = Bytes.create (overhead + n) in
  Bytes.blit_string magic 0 b 0 4;
  Bytes.set_uint8 b 4 e.version;
  Bytes.set_uint8 b 5 e.msg_type;
  Bytes.set_uint8 b 6 e.flags;
  Bytes.set_int64_le b 7 e.sequence;
  Bytes.set_int64_le b 15 e.timestamp_ns;
  Bytes.blit_string e.fingerprint 0 b 23 32;
  Bytes.set_int32_le b 55 (Int32.of_int n);
  Bytes.blit_string e.payload 0 b header_len n;
  let crc = Crc32c.bytes b 0 (header_len + n) in
  Bytes.set_int32_le b (header_len + n) (Int32.of_int crc);
  Bytes.unsafe_to_string b

let known_types = [ 0; 1; 2; 3; 4; 5 ]

(* The payload length a header claims, as an unsigned 32-bit number: a
   negative int32 is a length out of bounds, not a small number. *)
let claimed_length (h : Bytes.t) off = Int32.to_int (Bytes.get_int32_le h (off + 55)) land 0xFFFFFFFF

(* Checks of a header alone (the first 59 bytes), in the profile's order:
   the length bound first, then the magic. *)
let check_header ~max_payload (h : Bytes.t) off =
  let n = claimed_length h off in
  if n > max_payload then
    raise (Envelope_error (Length, Printf.sprintf "payload length %d exceeds the bound %d" n max_payload));
  if Bytes.sub_string h off 4 <> magic then
    raise (Envelope_error (Magic, Printf.sprintf "bad magic %S" (Bytes.sub_string h off 4)));
  n

(* Decode one whole envelope in [b] from [off] (header, payload, CRC all
   present). *)
let decode_at ~max_payload (b : Bytes.t) off =
  let n = check_header ~max_payload b off in
  let stored = Int32.to_int (Bytes.get_int32_le b (off + header_len + n)) land 0xFFFFFFFF in
  let computed = Crc32c.bytes b off (header_len + n) in
  if stored <> computed then
    raise (Envelope_error (Crc, Printf.sprintf "CRC-32C mismatch: stored %08x, computed %08x" stored computed));
  let v = Bytes.get_uint8 b (off + 4) in
  if v <> version then raise (Envelope_error (Version, Printf.sprintf "unsupported version %d" v));
  let t = Bytes.get_uint8 b (off + 5) in
  if not (List.mem t known_types) then raise (Envelope_error (Type, Printf.sprintf "unknown message type %d" t));
  let flags = Bytes.get_uint8 b (off + 6) in
  if flags <> 0 then raise (Envelope_error (Flags, Printf.sprintf "flags %d, not 0" flags));
  {
    version = v;
    msg_type = t;
    flags;
    sequence = Bytes.get_int64_le b (off + 7);
    timestamp_ns = Bytes.get_int64_le b (off + 15);
    fingerprint = Bytes.sub_string b (off + 23) 32;
    payload = Bytes.sub_string b (off + header_len) n;
  }

let decode ~max_payload s =
  let b = Bytes.unsafe_of_string s in
  let len = Bytes.length b in
  if len < overhead then
    raise (Envelope_error (Length, Printf.sprintf "%d bytes, shorter than the 63-byte envelope overhead" len));
  let n = claimed_length b 0 in
  if n <= max_payload && len <> overhead + n then
    raise (Envelope_error (Length, Printf.sprintf "payload length %d but %d bytes of envelope" n len));
  decode_at ~max_payload b 0

(* A stream reader: bytes in, whole envelopes out. An envelope error makes
   the reader dead (the stream cannot be resynchronised). Memory stays
   bounded: a header whose length exceeds max_payload is refused before its
   payload is awaited. *)
module Reader = struct
  type r = { max_payload : int; buf : Buffer.t; mutable dead : bool }

  let create ~max_payload = { max_payload; buf = Buffer.create 4096; dead = false }

  (* Returns the whole envelopes received, then the error that killed the
     reader if one did (envelopes before a bad one are still delivered). *)
  let receive r (data : string) =
    if r.dead then ([], Some (Length, "reader is dead after an earlier error"))
    else begin
      Buffer.add_string r.buf data;
      let out = ref [] in
      let pos = ref 0 in
      let all = Buffer.to_bytes r.buf in
      let total = Bytes.length all in
      let err = ref None in
      (try
         let continue = ref true in
         while !continue do
           if total - !pos < header_len then continue := false
           else begin
             let n = check_header ~max_payload:r.max_payload all !pos in
             if total - !pos < overhead + n then continue := false
             else begin
               out := decode_at ~max_payload:r.max_payload all !pos :: !out;
               pos := !pos + overhead + n
             end
           end
         done
       with Envelope_error (c, m) ->
         r.dead <- true;
         err := Some (c, m));
      Buffer.clear r.buf;
      if not r.dead then Buffer.add_subbytes r.buf all !pos (total - !pos);
      (List.rev !out, !err)
    end
end
