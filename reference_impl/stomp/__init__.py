"""STOMP 1.2 subset carrying the Swaptacular Messaging Protocol: the reference node."""
