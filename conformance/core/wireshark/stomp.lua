-- STOMP 1.0/1.1/1.2 frames over TCP, for Wireshark and tshark.
--
-- Wireshark has no STOMP dissector of its own; the harness's captures
-- (conformance/core/pcap.py: a pcapng per case beside its wire trace) of
-- STOMP cases are read with this one:
--
--   tshark -X lua_script:conformance/core/wireshark/stomp.lua -r CASE.pcapng -V
--
-- or, in Wireshark, copy it to the personal Lua plugins folder (Help >
-- About Wireshark > Folders). It finds STOMP by itself on any port (a TCP
-- heuristic: a stream whose first bytes are a STOMP command line), and
-- takes 61613 and 61614 (STOMP's usual ports) by default; "Decode As"
-- (tshark -d tcp.port==PORT,stomp) works as well.
--
-- A frame is a command line, header lines, an empty line and a body ended
-- by a NUL (after content-length bytes when that header is given); an end
-- of line between frames is a heart-beat. Frames split across segments are
-- reassembled; a frame the stream ends in the middle of stays unreassembled,
-- as TCP's "segment of a reassembled PDU".

local stomp = Proto("stomp", "STOMP (Simple Text Oriented Messaging Protocol)")

local f_command = ProtoField.string("stomp.command", "Command")
local f_header = ProtoField.string("stomp.header", "Header")
local f_header_name = ProtoField.string("stomp.header.name", "Name")
local f_header_value = ProtoField.string("stomp.header.value", "Value")
local f_body = ProtoField.bytes("stomp.body", "Body")
local f_body_text = ProtoField.string("stomp.body.text", "Body (text)")
local f_heartbeat = ProtoField.bytes("stomp.heartbeat", "Heart-beat (end of line)")

stomp.fields = { f_command, f_header, f_header_name, f_header_value, f_body, f_body_text, f_heartbeat }

local COMMANDS = {
    CONNECT = true, STOMP = true, CONNECTED = true, SEND = true, SUBSCRIBE = true,
    UNSUBSCRIBE = true, ACK = true, NACK = true, BEGIN = true, COMMIT = true, ABORT = true,
    DISCONNECT = true, MESSAGE = true, RECEIPT = true, ERROR = true,
}

local MAX_FRAME = 16 * 1024 * 1024
-- A frame claiming more (content-length) is shown as it is, not awaited.

-- The length of the heart-beats (EOLs) at ``offset``, 0 if none.
local function heartbeat_length(s, offset)
    local i = offset
    while true do
        local c = s:byte(i)
        if c == 10 then
            i = i + 1
        elseif c == 13 and s:byte(i + 1) == 10 then
            i = i + 2
        else
            return i - offset
        end
    end
end

-- Where the header section starting at ``offset`` ends: the index of the
-- first byte after the empty line, or nil when it is not complete yet.
local function headers_end(s, offset)
    local lf = s:find("\n\r?\n", offset)
    if lf == nil then
        return nil
    end
    local _, last = s:find("\n\r?\n", offset)
    return last + 1
end

-- The frame at ``offset`` (1-based in s): its total length, or nil while more
-- bytes are needed.
local function frame_length(s, offset)
    local body_start = headers_end(s, offset)
    if body_start == nil then
        return nil
    end
    local head = s:sub(offset, body_start - 1)
    local content_length = head:match("\ncontent%-length:%s*(%d+)\r?\n")
    if content_length ~= nil then
        local n = tonumber(content_length)
        if n ~= nil and n <= MAX_FRAME then
            local nul = body_start + n
            if nul > #s then
                return nil
            end
            return nul - offset + 1
        end
    end
    local nul = s:find("\0", body_start, true)
    if nul == nil then
        return nil
    end
    return nul - offset + 1
end

local function show_frame(tvb, tree, start, length, commands)
    local s = tvb:raw(start, length)
    local subtree = tree:add(stomp, tvb(start, length))
    local line_end = s:find("\n", 1, true) or (#s + 1)
    local command = s:sub(1, line_end - 1):gsub("\r$", "")
    subtree:add(f_command, tvb(start, line_end - 1), command)
    subtree:append_text(": " .. command)
    commands[#commands + 1] = command
    local at = line_end + 1
    while at <= #s do
        local next_lf = s:find("\n", at, true)
        if next_lf == nil then
            break
        end
        local line = s:sub(at, next_lf - 1):gsub("\r$", "")
        if line == "" then
            at = next_lf + 1
            break
        end
        local item = subtree:add(f_header, tvb(start + at - 1, next_lf - at), line)
        local colon = line:find(":", 1, true)
        if colon ~= nil then
            item:add(f_header_name, tvb(start + at - 1, colon - 1), line:sub(1, colon - 1))
            item:add(f_header_value, tvb(start + at - 1 + colon, #line - colon), line:sub(colon + 1))
        end
        at = next_lf + 1
    end
    local body_length = #s - at -- without the final NUL
    if body_length > 0 then
        local body = tvb(start + at - 1, body_length)
        subtree:add(f_body, body)
        local text = s:sub(at, at + body_length - 1)
        if not text:find("[%z\1-\8\14-\31\127-\255]") then
            subtree:add(f_body_text, body, text)
        end
    end
end

function stomp.dissector(tvb, pinfo, tree)
    local total = tvb:len()
    if total == 0 then
        return 0
    end
    local s = tvb:raw(0, total)
    local offset = 1
    local commands = {}
    while offset <= total do
        local beats = heartbeat_length(s, offset)
        if beats > 0 then
            tree:add(f_heartbeat, tvb(offset - 1, beats))
            commands[#commands + 1] = "heart-beat"
            offset = offset + beats
        else
            local length = frame_length(s, offset)
            if length == nil then
                pinfo.desegment_offset = offset - 1
                pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT
                break
            end
            show_frame(tvb, tree, offset - 1, length, commands)
            offset = offset + length
        end
    end
    if #commands > 0 then
        pinfo.cols.protocol = "STOMP"
        pinfo.cols.info = table.concat(commands, ", ")
    end
    return total
end

-- A stream whose segment begins with a STOMP command line (after any
-- heart-beats) is STOMP: the whole conversation then is.
local function heuristic(tvb, pinfo, tree)
    local total = tvb:len()
    if total < 4 then
        return false
    end
    local s = tvb:raw(0, math.min(total, 32))
    local command = s:match("^[\r\n]*(%u+)\r?\n")
    if command == nil or not COMMANDS[command] then
        return false
    end
    pinfo.conversation = stomp
    stomp.dissector(tvb, pinfo, tree)
    return true
end

local tcp_port = DissectorTable.get("tcp.port")
tcp_port:add(61613, stomp)
tcp_port:add(61614, stomp)
stomp:register_heuristic("tcp", heuristic)
