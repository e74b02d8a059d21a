"""NCCL flight-recorder dumps (flight_recorder), read for the hang analyses, with their tables.
"""
