module {}
)