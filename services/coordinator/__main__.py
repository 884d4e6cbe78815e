from services.coordinator.server import main

if __name__ == "__main__":
    main()
