/* Embeds the built-in model (CMake's CHANNEL_DEFAULT_MODEL, models/channel-bounded.gguf)
   into the binary, 64-byte aligned so that the GGUF tensor data keeps its alignment. */
    .section .rodata
    .balign 64
    .global channel_embedded_model_begin
channel_embedded_model_begin:
    .incbin CHANNEL_DEFAULT_MODEL_PATH
    .global channel_embedded_model_end
channel_embedded_model_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
